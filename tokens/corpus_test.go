package tokens

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ctxstore/ctxstore"
)

// The corpus: kinds of messages an agent's context holds, generated from
// a fixed seed by genCorpus below (ours, nothing copied). It is written to
// testdata/tokens/<kind>.jsonl, one message a line, so that other tests
// (the managers' property tests) can read it; TestCorpusFiles checks the
// files are what the generator makes. Regenerate with
//
//	CTXSTORE_WRITE_CORPUS=1 go test -run TestCorpusFiles ./tokens

const corpusDir = "../testdata/tokens"

// corpusKinds in the order the ratio table prints them.
var corpusKinds = []string{
	"prose", "code", "json", "logs", "base64", "cjk", "emoji", "mixed",
	"toolcalls", "toolresults", "conversations",
}

// convLen is the length of one conversation in conversations.jsonl.
const convLen = 50

type gen struct {
	r  *rand.Rand
	id int
}

func (g *gen) pick(xs []string) string { return xs[g.r.IntN(len(xs))] }

func (g *gen) callID() string {
	g.id++
	if g.r.IntN(2) == 0 {
		return fmt.Sprintf("call_%s", g.alnum(24))
	}
	return fmt.Sprintf("toolu_01%s", g.alnum(22))
}

func (g *gen) alnum(n int) string {
	const set = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, n)
	for i := range b {
		b[i] = set[g.r.IntN(len(set))]
	}
	return string(b)
}

func (g *gen) uuid() string {
	b := make([]byte, 16)
	for i := range b {
		b[i] = byte(g.r.IntN(256))
	}
	h := hex.EncodeToString(b)
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

func (g *gen) randBytes(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(g.r.IntN(256))
	}
	return b
}

func (g *gen) when() time.Time {
	return time.Date(2026, 11, 1+g.r.IntN(28), g.r.IntN(24), g.r.IntN(60), g.r.IntN(60), g.r.IntN(1e9), time.UTC)
}

// msg marshals fields in order into a message.
func msg(kv ...any) ctxstore.Message {
	var b bytes.Buffer
	b.WriteByte('{')
	for i := 0; i < len(kv); i += 2 {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(kv[i])
		v, err := json.Marshal(kv[i+1])
		if err != nil {
			panic(err)
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return ctxstore.MustParseMessage(b.Bytes())
}

var (
	enWords = strings.Fields(`the a an of to in and or but is are was were be been have has had do does did
	will would can could should may might must not no yes this that these those it its they them their we our
	you your he she his her file files function functions value values error errors test tests build run
	server request response client data database table query index cache memory context window token tokens
	budget model agent tool tools result results message messages history session store log logs line lines
	change changes commit branch merge review code repository package module import export config setting
	user users system process thread time timeout retry network connection performance latency throughput
	because however therefore although while when where which what why how after before during between
	simple complex important necessary possible different similar available current previous next first last
	quickly carefully probably actually especially usually already still again also only just even well
	understand explain describe implement improve measure compare consider suggest expect require provide
	infrastructure configuration authentication authorization serialization documentation implementation
	deterministic idempotent asynchronous concurrency compaction tokenizer throughput durability`)
	ruWords = strings.Fields(`и в не на я что тот быть с а весь это как она по но они к у мы вы из за так же
	от сказать этот который мочь человек о один еще бы такой только себя свое какой когда уже для вот кто да
	говорить год знать мой до или если время рука нет самый ни стать большой даже другой наш свой ну под где
	дело есть сам раз чтобы два там чем глаз жизнь первый день тут во ничто потом очень со хотеть ли при
	голова надо без видеть идти теперь тоже стоять друг дом сейчас можно после слово здесь думать место
	спросить через лицо что-то работа файл ошибка сервер запрос данные память контекст модель агент`)
	arWords = strings.Fields(`في من على إلى عن مع هذا هذه التي الذي كان كانت يكون قد لا ما لم لن هو هي هم نحن
	أنا أنت كل بعض بين عند بعد قبل حتى إذا أو ثم لكن العمل الملف الخطأ الخادم الطلب البيانات الذاكرة
	النموذج الوكيل الأداة النتيجة الرسالة الجلسة الوقت الشبكة المستخدم النظام البرنامج الكود التغيير`)
	hiWords = strings.Fields(`और का की के में है हैं यह वह से को पर भी नहीं एक था थी थे हो कर लिए जो कि तो
	ही या अपने इस उस कुछ सब कोई जब तक बहुत साथ बाद पहले काम फ़ाइल त्रुटि सर्वर अनुरोध डेटा स्मृति संदर्भ
	मॉडल एजेंट उपकरण परिणाम संदेश सत्र समय नेटवर्क उपयोगकर्ता प्रणाली`)
	elWords = strings.Fields(`και το η ο να του της σε με για από που δεν είναι θα τα οι στο στη αυτό
	αρχείο σφάλμα διακομιστής αίτημα δεδομένα μνήμη μοντέλο πράκτορας εργαλείο αποτέλεσμα μήνυμα`)
	heWords = strings.Fields(`של את על זה לא עם הוא היא אני אתה כל מה גם או אבל כי יש אין קובץ שגיאה
	שרת בקשה נתונים זיכרון מודל סוכן כלי תוצאה הודעה זמן רשת משתמש מערכת`)
	thWords = strings.Fields(`การ ที่ และ ใน ของ เป็น มี ไม่ ได้ จะ ให้ ว่า กับ ไป มา แล้ว คือ นี้ ไฟล์
	ข้อผิดพลาด เซิร์ฟเวอร์ คำขอ ข้อมูล หน่วยความจำ โมเดล เอเจนต์ เครื่องมือ ผลลัพธ์ ข้อความ`)
	zhWords = strings.Fields(`的 一 是 在 不 了 有 和 人 这 中 大 为 上 个 国 我 以 要 他 时 来 用 们 生 到
	作 地 于 出 就 分 对 成 会 可 主 发 年 动 同 工 也 能 下 过 子 说 产 种 面 而 方 后 多 定 行 学 法
	文件 错误 服务器 请求 数据 内存 上下文 模型 代理 工具 结果 消息 会话 时间 网络 用户 系统 程序 代码
	修改 测试 构建 运行 配置 性能 延迟 我们 需要 可以 已经 因为 所以 但是 如果 然后 问题 方法 函数`)
	jaWords = strings.Fields(`の に は を た が で て と し れ さ ある いる も する から な こと として い や
	ファイル エラー サーバー リクエスト データ メモリ コンテキスト モデル エージェント ツール 結果
	メッセージ セッション 時間 ネットワーク ユーザー システム プログラム コード 変更 テスト 実行 設定
	です ます ません でした 確認 してください 問題 方法 関数 必要`)
	koWords = strings.Fields(`이 그 저 것 수 등 들 및 에서 으로 하다 있다 되다 없다 않다 같다 파일 오류
	서버 요청 데이터 메모리 컨텍스트 모델 에이전트 도구 결과 메시지 세션 시간 네트워크 사용자 시스템
	프로그램 코드 변경 테스트 실행 설정 합니다 했습니다 확인 문제 방법 함수 필요`)
	emojis = strings.Fields(`😀 😂 🤣 😊 😍 🤔 😅 😭 😎 🙃 👍 👎 👏 🙏 💪 🔥 ✨ 🎉 🚀 ✅ ❌ ⚠️ 💡 📝 🐛 🔧 📦 🧪
	❤️ 💯 🤖 👀 🙌 😬 🥲 🫠 🧵 📈 📉 🕐 ☕ 🍕 🌍 🇺🇸 🇯🇵 🇩🇪 👍🏽 👋🏻 👨‍💻 👩‍🔬 🏳️‍🌈 🤷‍♂️ 1️⃣`)
)

func (g *gen) sentence(words []string, sep string, min, max int) string {
	n := min + g.r.IntN(max-min+1)
	ws := make([]string, n)
	for i := range ws {
		ws[i] = g.pick(words)
	}
	s := strings.Join(ws, sep)
	if sep == " " && s != "" {
		s = strings.ToUpper(s[:1]) + s[1:]
	}
	return s
}

func (g *gen) prose(size int) string {
	var b strings.Builder
	for b.Len() < size {
		s := g.sentence(enWords, " ", 5, 22)
		switch g.r.IntN(10) {
		case 0:
			s += fmt.Sprintf(" (%d%%)", g.r.IntN(100))
		case 1:
			s = "I don't think it's " + s + ", we'll see"
		case 2:
			s += ": `" + g.pick([]string{"AddMessage", "GetMessagesForRequest", "store.Open", "ctx.Done()", "--budget=8000"}) + "`"
		}
		b.WriteString(s + g.pick([]string{". ", "? ", "! ", ".\n\n", ", and ", "; "}))
	}
	return b.String()
}

func (g *gen) words(ws []string, sep, end string, size int) string {
	var b strings.Builder
	for b.Len() < size {
		b.WriteString(g.sentence(ws, sep, 4, 16) + end)
		if g.r.IntN(4) == 0 {
			b.WriteString("\n")
		}
	}
	return b.String()
}

func (g *gen) ident() string {
	parts := []string{"user", "session", "token", "count", "store", "message", "budget", "view", "index", "cache", "err", "ctx", "buf", "id", "name", "value", "result"}
	a, b := g.pick(parts), g.pick(parts)
	switch g.r.IntN(3) {
	case 0:
		return a + strings.ToUpper(b[:1]) + b[1:]
	case 1:
		return a + "_" + b
	}
	return a
}

func (g *gen) goCode(lines int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "func (s *%s) %s(ctx context.Context, %s string) (int, error) {\n", strings.ToUpper(g.ident()[:1])+"tore", strings.ToUpper(g.ident()[:1])+g.ident()[1:], g.ident())
	for range lines {
		ind := strings.Repeat("\t", 1+g.r.IntN(3))
		switch g.r.IntN(6) {
		case 0:
			fmt.Fprintf(&b, "%sif err := s.%s(ctx, %s); err != nil {\n%s\treturn 0, fmt.Errorf(\"%s %%q: %%w\", %s, err)\n%s}\n", ind, g.ident(), g.ident(), ind, g.pick(enWords), g.ident(), ind)
		case 1:
			fmt.Fprintf(&b, "%s%s := make([]%s, 0, %d)\n", ind, g.ident(), g.pick([]string{"byte", "int", "string", "ctxstore.Message"}), g.r.IntN(512))
		case 2:
			fmt.Fprintf(&b, "%sfor i, %s := range %s {\n%s\t%s += len(%s) * %d\n%s}\n", ind, g.ident(), g.ident(), ind, g.ident(), g.ident(), g.r.IntN(64), ind)
		case 3:
			fmt.Fprintf(&b, "%s// %s\n", ind, g.sentence(enWords, " ", 4, 12))
		case 4:
			fmt.Fprintf(&b, "%s%s, ok := %s[%q]\n", ind, g.ident(), g.ident(), g.ident())
		default:
			fmt.Fprintf(&b, "%sreturn %s(%s, %d), nil\n", ind, g.ident(), g.ident(), g.r.IntN(1000))
		}
	}
	b.WriteString("}\n")
	return b.String()
}

func (g *gen) pyCode(lines int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "def %s(self, %s: str, %s: int = %d) -> dict:\n    \"\"\"%s.\"\"\"\n", g.ident(), g.ident(), g.ident(), g.r.IntN(100), g.sentence(enWords, " ", 4, 10))
	for range lines {
		ind := strings.Repeat("    ", 1+g.r.IntN(3))
		switch g.r.IntN(5) {
		case 0:
			fmt.Fprintf(&b, "%sif %s is None or len(%s) > %d:\n%s    raise ValueError(f\"{%s!r} %s\")\n", ind, g.ident(), g.ident(), g.r.IntN(4096), ind, g.ident(), g.sentence(enWords, " ", 2, 6))
		case 1:
			fmt.Fprintf(&b, "%s%s = [x for x in %s if x.%s]\n", ind, g.ident(), g.ident(), g.ident())
		case 2:
			fmt.Fprintf(&b, "%s# %s\n", ind, g.sentence(enWords, " ", 3, 10))
		case 3:
			fmt.Fprintf(&b, "%sself.%s[%q] = %s.get(%q, %0.2f)\n", ind, g.ident(), g.ident(), g.ident(), g.ident(), g.r.Float64()*100)
		default:
			fmt.Fprintf(&b, "%sreturn {%q: %s, %q: %d}\n", ind, g.ident(), g.ident(), g.ident(), g.r.IntN(1000))
		}
	}
	return b.String()
}

func (g *gen) jsCode(lines int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "export async function %s(%s, { %s = %d } = {}) {\n", g.ident(), g.ident(), g.ident(), g.r.IntN(100))
	for range lines {
		ind := strings.Repeat("  ", 1+g.r.IntN(3))
		switch g.r.IntN(5) {
		case 0:
			fmt.Fprintf(&b, "%sconst %s = await fetch(`/api/%s/${%s}`, { method: '%s' });\n", ind, g.ident(), g.ident(), g.ident(), g.pick([]string{"GET", "POST", "PUT"}))
		case 1:
			fmt.Fprintf(&b, "%sif (!%s.ok) throw new Error(`%s: ${%s.status}`);\n", ind, g.ident(), g.sentence(enWords, " ", 2, 5), g.ident())
		case 2:
			fmt.Fprintf(&b, "%s// %s\n", ind, g.sentence(enWords, " ", 3, 10))
		case 3:
			fmt.Fprintf(&b, "%s%s.forEach((%s) => { %s += %s.length ?? 0; });\n", ind, g.ident(), g.ident(), g.ident(), g.ident())
		default:
			fmt.Fprintf(&b, "%sreturn { %s, %s: %s === %d };\n", ind, g.ident(), g.ident(), g.ident(), g.r.IntN(10))
		}
	}
	b.WriteString("}\n")
	return b.String()
}

func (g *gen) code(size int) string {
	var b strings.Builder
	for b.Len() < size {
		n := 4 + g.r.IntN(20)
		switch g.r.IntN(3) {
		case 0:
			b.WriteString("```go\n" + g.goCode(n) + "```\n")
		case 1:
			b.WriteString("```python\n" + g.pyCode(n) + "```\n")
		default:
			b.WriteString("```js\n" + g.jsCode(n) + "```\n")
		}
		if g.r.IntN(2) == 0 {
			b.WriteString(g.prose(80) + "\n")
		}
	}
	return b.String()
}

func (g *gen) jsonDoc(size int) string {
	var items []map[string]any
	n := 0
	for n < size {
		it := map[string]any{
			"id":         g.uuid(),
			"timestamp":  g.when().Format(time.RFC3339Nano),
			"name":       g.ident(),
			"value":      g.r.Float64() * float64(g.r.IntN(100000)),
			"count":      g.r.IntN(1 << 20),
			"ok":         g.r.IntN(2) == 0,
			"tags":       []string{g.pick(enWords), g.pick(enWords)},
			"latency_ms": map[string]float64{"p50": float64(g.r.IntN(10000)) / 100, "p99": float64(g.r.IntN(100000)) / 100},
		}
		items = append(items, it)
		b, _ := json.Marshal(it)
		n += len(b)
	}
	var b []byte
	if g.r.IntN(2) == 0 {
		b, _ = json.MarshalIndent(map[string]any{"items": items, "total": len(items)}, "", "  ")
	} else {
		b, _ = json.Marshal(map[string]any{"items": items, "total": len(items)})
	}
	return string(b)
}

func (g *gen) logs(size int) string {
	var b strings.Builder
	switch g.r.IntN(3) {
	case 0:
		b.WriteString("NAME                                READY   STATUS             RESTARTS        AGE\n")
		for b.Len() < size {
			fmt.Fprintf(&b, "%-35s %d/%d     %-18s %-15s %dd%dh\n", g.ident()+"-"+g.alnum(10)+"-"+g.alnum(5), g.r.IntN(3), 1+g.r.IntN(2),
				g.pick([]string{"Running", "CrashLoopBackOff", "Pending", "Completed", "Error"}), fmt.Sprint(g.r.IntN(40)), g.r.IntN(30), g.r.IntN(24))
		}
	case 1:
		for b.Len() < size {
			fmt.Fprintf(&b, "%s %-5s [%s] request_id=%s user=%d path=/api/v1/%s/%d status=%s duration=%.3fms %s\n",
				g.when().Format("2006-01-02T15:04:05.000Z07:00"), g.pick([]string{"INFO", "WARN", "ERROR", "DEBUG"}), g.ident(), g.uuid(),
				g.r.IntN(100000), g.ident(), g.r.IntN(10000), g.pick([]string{"200", "201", "404", "500", "503"}), g.r.Float64()*1000, g.sentence(enWords, " ", 0, 8))
		}
	default:
		b.WriteString("total " + fmt.Sprint(g.r.IntN(10000)) + "\n")
		for b.Len() < size {
			fmt.Fprintf(&b, "%s %3d %s %s %8d %s %s\n", g.pick([]string{"-rw-r--r--", "drwxr-xr-x", "-rwxr-xr-x", "lrwxrwxrwx"}), 1+g.r.IntN(20),
				g.pick([]string{"root", "app", "www-data"}), g.pick([]string{"root", "staff", "docker"}), g.r.IntN(1<<24),
				g.when().Format("Jan _2 15:04"), g.ident()+g.pick([]string{".go", ".py", ".json", ".log", "", ".tar.gz"}))
		}
	}
	return b.String()
}

func (g *gen) base64Text(size int) string {
	var b strings.Builder
	b.WriteString(g.sentence(enWords, " ", 3, 10) + ":\n")
	switch g.r.IntN(3) {
	case 0:
		enc := base64.StdEncoding.EncodeToString(g.randBytes(size * 3 / 4))
		b.WriteString("-----BEGIN CERTIFICATE-----\n")
		for len(enc) > 64 {
			b.WriteString(enc[:64] + "\n")
			enc = enc[64:]
		}
		b.WriteString(enc + "\n-----END CERTIFICATE-----\n")
	case 1:
		hdr := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"RS256","typ":"JWT","kid":"` + g.alnum(16) + `"}`))
		claims := base64.RawURLEncoding.EncodeToString([]byte(fmt.Sprintf(`{"sub":"%s","iat":%d,"exp":%d,"scope":"read write","email":"%s@example.com"}`, g.uuid(), 1.7e9+g.r.IntN(1e8), 1.8e9+g.r.IntN(1e8), g.ident())))
		sig := base64.RawURLEncoding.EncodeToString(g.randBytes(256))
		for b.Len() < size {
			b.WriteString("Authorization: Bearer " + hdr + "." + claims + "." + sig + "\n")
		}
	default:
		b.WriteString(`<img src="data:image/png;base64,` + base64.StdEncoding.EncodeToString(g.randBytes(size*3/4)) + `" alt="chart">` + "\n")
	}
	return b.String()
}

func (g *gen) emojiChat(size int) string {
	var b strings.Builder
	for b.Len() < size {
		b.WriteString(g.sentence(enWords, " ", 2, 9))
		for range 1 + g.r.IntN(4) {
			b.WriteString(" " + g.pick(emojis))
		}
		b.WriteString(g.pick([]string{" ", "\n", "!! ", " lol "}))
	}
	return b.String()
}

func (g *gen) mixed(size int) string {
	var b strings.Builder
	langs := []func() string{
		func() string { return g.sentence(ruWords, " ", 4, 14) + ". " },
		func() string { return g.sentence(arWords, " ", 4, 14) + ". " },
		func() string { return g.sentence(hiWords, " ", 4, 14) + "। " },
		func() string { return g.sentence(elWords, " ", 4, 12) + ". " },
		func() string { return g.sentence(heWords, " ", 4, 12) + ". " },
		func() string { return g.sentence(thWords, "", 4, 12) + " " },
		func() string { return g.sentence(enWords, " ", 4, 12) + ". " },
	}
	for b.Len() < size {
		b.WriteString(langs[g.r.IntN(len(langs))]())
	}
	return b.String()
}

func (g *gen) cjk(size int) string {
	switch g.r.IntN(3) {
	case 0:
		return g.words(zhWords, "", "。", size)
	case 1:
		return g.words(jaWords, "", "。", size)
	}
	return g.words(koWords, " ", ". ", size)
}

func (g *gen) size() int { return 200 + g.r.IntN(3000) }

// toolCall makes an assistant message calling a tool with code or a
// command in its arguments, OpenAI or Anthropic style; it returns the
// call id.
func (g *gen) toolCall() (ctxstore.Message, string) {
	id := g.callID()
	var args map[string]any
	name := g.pick([]string{"write_file", "edit_file", "run_shell", "search_code", "apply_patch"})
	switch name {
	case "write_file", "apply_patch":
		args = map[string]any{"path": "internal/" + g.ident() + "/" + g.ident() + ".go", "content": g.code(200 + g.r.IntN(1500))}
	case "edit_file":
		args = map[string]any{"path": g.ident() + ".py", "old_string": g.pyCode(3), "new_string": g.pyCode(5)}
	case "run_shell":
		args = map[string]any{"command": fmt.Sprintf("go test -run '%s' ./%s/... 2>&1 | tail -n %d", g.ident(), g.ident(), g.r.IntN(100)), "timeout_ms": g.r.IntN(600000)}
	default:
		args = map[string]any{"pattern": g.ident() + `\(ctx`, "glob": "**/*.go", "max_results": g.r.IntN(200)}
	}
	argJSON, _ := json.Marshal(args)
	if g.r.IntN(2) == 0 {
		return msg("role", "assistant", "content", g.prose(g.r.IntN(300)), "tool_calls", []any{
			map[string]any{"id": id, "type": "function", "function": map[string]any{"name": name, "arguments": string(argJSON)}},
		}), id
	}
	return msg("role", "assistant", "content", []any{
		map[string]any{"type": "text", "text": g.prose(20 + g.r.IntN(300))},
		map[string]any{"type": "tool_use", "id": id, "name": name, "input": json.RawMessage(argJSON)},
	}), id
}

// toolResult answers id with tool output of some kind.
func (g *gen) toolResult(id string) ctxstore.Message {
	var out string
	switch g.r.IntN(4) {
	case 0:
		out = g.jsonDoc(g.size())
	case 1:
		out = g.logs(g.size())
	case 2:
		out = g.code(g.size())
	default:
		out = g.prose(g.size())
	}
	if strings.HasPrefix(id, "call_") {
		return msg("role", "tool", "tool_call_id", id, "content", out)
	}
	var c any = out
	if g.r.IntN(2) == 0 {
		c = []any{map[string]any{"type": "text", "text": out}}
	}
	return msg("role", "user", "content", []any{map[string]any{"type": "tool_result", "tool_use_id": id, "content": c}})
}

// conversation is one agent session: a system prompt, user turns, tool
// loops and answers.
func (g *gen) conversation() []ctxstore.Message {
	ms := []ctxstore.Message{msg("role", "system", "content", "You are a coding agent. "+g.prose(600))}
	for len(ms) < convLen {
		switch g.r.IntN(6) {
		case 0:
			kinds := []func(int) string{g.prose, g.code, g.base64Text, g.emojiChat}
			ms = append(ms, msg("role", "user", "content", kinds[g.r.IntN(len(kinds))](200+g.r.IntN(1200))))
		case 1:
			ms = append(ms, msg("role", "assistant", "content", g.prose(100+g.r.IntN(1500))))
		default:
			call, id := g.toolCall()
			ms = append(ms, call, g.toolResult(id))
		}
	}
	return ms[:convLen]
}

// genCorpus makes every kind's messages, deterministically.
func genCorpus() map[string][]ctxstore.Message {
	g := &gen{r: rand.New(rand.NewPCG(2026, 11))}
	user := func(f func(int) string) func() ctxstore.Message {
		return func() ctxstore.Message {
			return msg("role", g.pick([]string{"user", "assistant"}), "content", f(g.size()))
		}
	}
	makers := map[string]func() ctxstore.Message{
		"prose":  user(g.prose),
		"code":   user(g.code),
		"base64": user(g.base64Text),
		"cjk":    user(g.cjk),
		"emoji":  user(g.emojiChat),
		"mixed":  user(g.mixed),
		"json": func() ctxstore.Message {
			return msg("role", "tool", "tool_call_id", g.callID(), "content", g.jsonDoc(g.size()))
		},
		"logs": func() ctxstore.Message {
			return msg("role", "tool", "tool_call_id", g.callID(), "content", g.logs(g.size()))
		},
		"toolcalls":   func() ctxstore.Message { m, _ := g.toolCall(); return m },
		"toolresults": func() ctxstore.Message { return g.toolResult(g.callID()) },
	}
	out := map[string][]ctxstore.Message{}
	for _, kind := range corpusKinds {
		if kind == "conversations" {
			for range 20 {
				out[kind] = append(out[kind], g.conversation()...)
			}
			continue
		}
		for range 100 {
			out[kind] = append(out[kind], makers[kind]())
		}
	}
	return out
}

func encodeJSONL(ms []ctxstore.Message) []byte {
	var b bytes.Buffer
	for _, m := range ms {
		b.Write(m.Bytes())
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// readCorpus reads testdata/tokens.
func readCorpus(t testing.TB) map[string][]ctxstore.Message {
	t.Helper()
	out := map[string][]ctxstore.Message{}
	for _, kind := range corpusKinds {
		f, err := os.Open(filepath.Join(corpusDir, kind+".jsonl"))
		if err != nil {
			t.Fatalf("corpus: %v (regenerate: CTXSTORE_WRITE_CORPUS=1 go test -run TestCorpusFiles ./tokens)", err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			m, err := ctxstore.ParseMessage(sc.Bytes())
			if err != nil {
				t.Fatalf("corpus %s: %v", kind, err)
			}
			out[kind] = append(out[kind], m)
		}
		f.Close()
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// TestCorpusFiles checks that testdata/tokens holds what genCorpus makes,
// and rewrites it when CTXSTORE_WRITE_CORPUS=1.
func TestCorpusFiles(t *testing.T) {
	c := genCorpus()
	write := os.Getenv("CTXSTORE_WRITE_CORPUS") == "1"
	if write {
		if err := os.MkdirAll(corpusDir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, kind := range corpusKinds {
		want := encodeJSONL(c[kind])
		path := filepath.Join(corpusDir, kind+".jsonl")
		if write {
			if err := os.WriteFile(path, want, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (regenerate: CTXSTORE_WRITE_CORPUS=1 go test -run TestCorpusFiles ./tokens)", err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from what the generator makes; regenerate: CTXSTORE_WRITE_CORPUS=1 go test -run TestCorpusFiles ./tokens", path)
		}
	}
}
