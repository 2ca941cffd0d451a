package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	pb "github.com/ctxstore/ctxstore/amplifier/amplifierpb"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// binary builds the module once per test run.
func binary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "ctxstore-amplifier-test")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "ctxstore-amplifier")
		out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binPath != "" {
		_ = os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}

// module is one spawned module process and the host's connection to it.
type module struct {
	cmd    *exec.Cmd
	stderr *lockedBuffer
	conn   *grpc.ClientConn
	ctx    pb.ContextServiceClient
	life   pb.ModuleLifecycleClient
}

// lockedBuffer is the module's standard error, written by exec's copying
// goroutine while the test reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// waitFor reports whether s shows up within d (the copy lags the module's
// write).
func (b *lockedBuffer) waitFor(s string, d time.Duration) bool {
	for end := time.Now().Add(d); ; time.Sleep(10 * time.Millisecond) {
		if strings.Contains(b.String(), s) {
			return true
		}
		if time.Now().After(end) {
			return false
		}
	}
}

// freePort picks a port as a host does before spawning a module.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// spawn starts the module as Amplifier's host does: --port N, then wait
// (10 s at most) for the line READY:N on its standard output, then connect
// to localhost:N without TLS.
func spawn(t *testing.T, env ...string) *module {
	t.Helper()
	port := freePort(t)
	cmd := exec.Command(binary(t), "--port", fmt.Sprint(port))
	cmd.Env = append(os.Environ(), env...)
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	ready := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		ready <- strings.TrimSpace(line)
	}()
	select {
	case line := <-ready:
		if line != fmt.Sprintf("READY:%d", port) {
			t.Fatalf("first line %q, want READY:%d; stderr:\n%s", line, port, stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("no READY line within 10 s; stderr:\n%s", stderr.String())
	}
	conn, err := grpc.NewClient(fmt.Sprintf("localhost:%d", port), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return &module{cmd: cmd, stderr: &stderr, conn: conn, ctx: pb.NewContextServiceClient(conn), life: pb.NewModuleLifecycleClient(conn)}
}

// stop sends SIGTERM and checks the module exits 0.
func (m *module) stop(t *testing.T) {
	t.Helper()
	_ = m.conn.Close()
	if err := m.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- m.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("module exited with %v after SIGTERM; stderr:\n%s", err, m.stderr.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatal("module still running 15 s after SIGTERM")
	}
}

func (m *module) mount(t *testing.T, config map[string]string) {
	t.Helper()
	resp, err := m.life.Mount(context.Background(), &pb.MountRequest{Config: config, ModuleId: "context-ctxstore"})
	if err != nil || !resp.GetSuccess() {
		t.Fatalf("Mount: %v %v; stderr:\n%s", resp, err, m.stderr.String())
	}
}

func (m *module) add(t *testing.T, msgs ...*pb.Message) {
	t.Helper()
	for _, msg := range msgs {
		if _, err := m.ctx.AddMessage(context.Background(), &pb.AddMessageRequest{Message: msg}); err != nil {
			t.Fatalf("AddMessage(%v): %v", msg, err)
		}
	}
}

func (m *module) messages(t *testing.T) []*pb.Message {
	t.Helper()
	resp, err := m.ctx.GetMessages(context.Background(), &pb.Empty{})
	if err != nil {
		t.Fatalf("GetMessages: %v", err)
	}
	return resp.GetMessages()
}

func text(role pb.Role, s string) *pb.Message {
	return &pb.Message{Role: role, Content: &pb.Message_TextContent{TextContent: s}}
}

// conversation is a session as a host builds it: system prompt, user
// turns, a tool call in Amplifier's blocks and its result.
func conversation() []*pb.Message {
	call := &pb.Message{Role: pb.Role_ROLE_ASSISTANT, Content: &pb.Message_BlockContent{BlockContent: &pb.ContentBlockList{Blocks: []*pb.ContentBlock{
		{Block: &pb.ContentBlock_ThinkingBlock{ThinkingBlock: &pb.ThinkingBlock{Thinking: "list it", Signature: "sig=="}}, Visibility: pb.Visibility_VISIBILITY_LLM_ONLY},
		{Block: &pb.ContentBlock_ToolCallBlock{ToolCallBlock: &pb.ToolCallBlock{Id: "call_1", Name: "ls", InputJson: `{"path":"/tmp","n":1.0}`}}},
	}}}}
	result := &pb.Message{Role: pb.Role_ROLE_TOOL, ToolCallId: "call_1", Content: &pb.Message_BlockContent{BlockContent: &pb.ContentBlockList{Blocks: []*pb.ContentBlock{
		{Block: &pb.ContentBlock_ToolResultBlock{ToolResultBlock: &pb.ToolResultBlock{ToolCallId: "call_1", OutputJson: `{"files":["a","b"]}`}}},
	}}}}
	return []*pb.Message{
		text(pb.Role_ROLE_SYSTEM, "You are terse."),
		text(pb.Role_ROLE_USER, "What is in /tmp?"),
		call,
		result,
		{Role: pb.Role_ROLE_ASSISTANT, Content: &pb.Message_TextContent{TextContent: "a and b."}, MetadataJson: `{"usage":{"output_tokens":3}}`},
	}
}

func equalMessages(t *testing.T, what string, got, want []*pb.Message) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d messages, want %d:\n%v", what, len(got), len(want), got)
	}
	for i := range got {
		if !proto.Equal(got[i], want[i]) {
			t.Fatalf("%s: message %d\n got %v\nwant %v", what, i, got[i], want[i])
		}
	}
}

func code(err error) codes.Code { return status.Code(err) }

// TestHostLifecycle drives the module as Amplifier's host does: spawn,
// READY, Mount, the five context calls, a restart that resumes the
// session, the host's filtered SetMessages ignored, Clear.
func TestHostLifecycle(t *testing.T) {
	db := filepath.Join(t.TempDir(), "ctx.db")
	bg := context.Background()
	m := spawn(t)

	if _, err := m.ctx.GetMessages(bg, &pb.Empty{}); code(err) != codes.FailedPrecondition {
		t.Fatalf("GetMessages before Mount: %v, want FAILED_PRECONDITION", err)
	}
	if h, err := m.life.HealthCheck(bg, &pb.Empty{}); err != nil || h.GetStatus() != pb.HealthStatus_HEALTH_STATUS_NOT_SERVING {
		t.Fatalf("HealthCheck before Mount: %v %v, want NOT_SERVING", h, err)
	}
	m.mount(t, map[string]string{"db": db, "session": "s1"})
	if h, err := m.life.HealthCheck(bg, &pb.Empty{}); err != nil || h.GetStatus() != pb.HealthStatus_HEALTH_STATUS_SERVING || !strings.Contains(h.GetMessage(), "s1") {
		t.Fatalf("HealthCheck after Mount: %v %v, want SERVING naming s1", h, err)
	}

	conv := conversation()
	if _, err := m.ctx.SetMessages(bg, &pb.SetMessagesRequest{Messages: conv[:2]}); err != nil {
		t.Fatalf("SetMessages on a fresh session: %v", err)
	}
	m.add(t, conv[2:]...)
	equalMessages(t, "GetMessages", m.messages(t), conv)
	view, err := m.ctx.GetMessagesForRequest(bg, &pb.GetMessagesForRequestParams{TokenBudget: 0, ProviderName: "openai"})
	if err != nil {
		t.Fatal(err)
	}
	equalMessages(t, "view without a budget", view.GetMessages(), conv)

	// Restart: the new process resumes the session from its file.
	m.stop(t)
	m = spawn(t)
	m.mount(t, map[string]string{"db": db, "session": "s1"})
	equalMessages(t, "after restart", m.messages(t), conv)
	// The host hands back its filtered transcript (no system message):
	// the session's own log is authoritative, so it is ignored.
	if _, err := m.ctx.SetMessages(bg, &pb.SetMessagesRequest{Messages: conv[1:]}); err != nil {
		t.Fatalf("SetMessages after resume: %v", err)
	}
	equalMessages(t, "after the filtered SetMessages", m.messages(t), conv)

	if _, err := m.ctx.Clear(bg, &pb.Empty{}); err != nil {
		t.Fatal(err)
	}
	if got := m.messages(t); len(got) != 0 {
		t.Fatalf("after Clear: %v, want none", got)
	}
	m.add(t, text(pb.Role_ROLE_USER, "again"))
	equalMessages(t, "after Clear and an add", m.messages(t), []*pb.Message{text(pb.Role_ROLE_USER, "again")})
	if _, err := m.life.Cleanup(bg, &pb.Empty{}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.ctx.GetMessages(bg, &pb.Empty{}); code(err) != codes.FailedPrecondition {
		t.Fatalf("GetMessages after Cleanup: %v, want FAILED_PRECONDITION", err)
	}
	m.stop(t)
}

// TestHostViewFitsBudget: a budget smaller than the history gives a
// compacted view, as typed messages, with the tool call and its result
// kept together or dropped together.
func TestHostViewFitsBudget(t *testing.T) {
	m := spawn(t)
	m.mount(t, map[string]string{"db": filepath.Join(t.TempDir(), "ctx.db"), "session": "budget", "disable_notice": "true"})
	m.add(t, conversation()...)
	for i := range 40 {
		m.add(t, text(pb.Role_ROLE_USER, strings.Repeat(fmt.Sprintf("filler %d ", i), 30)), text(pb.Role_ROLE_ASSISTANT, "ok"))
	}
	m.add(t, conversation()[2:4]...)
	resp, err := m.ctx.GetMessagesForRequest(context.Background(), &pb.GetMessagesForRequestParams{TokenBudget: 2000})
	if err != nil {
		t.Fatal(err)
	}
	got := resp.GetMessages()
	if len(got) >= 85 || len(got) < 3 {
		t.Fatalf("view of %d messages for a 2000-token budget over 85", len(got))
	}
	calls, results := 0, 0
	for _, msg := range got {
		if msg.GetRole() == pb.Role_ROLE_UNSPECIFIED {
			t.Fatalf("view message sent untyped: %v", msg)
		}
		for _, b := range msg.GetBlockContent().GetBlocks() {
			if b.GetToolCallBlock() != nil {
				calls++
			}
		}
		if msg.GetRole() == pb.Role_ROLE_TOOL {
			results++
		}
	}
	if calls != results || calls == 0 {
		t.Fatalf("view has %d tool calls and %d results; want the newest pair kept together:\n%v", calls, results, got)
	}
}

// TestHostErrors: the gRPC codes a host can act on.
func TestHostErrors(t *testing.T) {
	bg := context.Background()
	m := spawn(t)
	_, err := m.life.Mount(bg, &pb.MountRequest{Config: map[string]string{"db": filepath.Join(t.TempDir(), "x.db"), "max_tokenz": "5"}})
	if code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "max_tokenz: unknown key") || !strings.Contains(err.Error(), "max_tokens") {
		t.Fatalf("Mount with an unknown key: %v, want INVALID_ARGUMENT naming it and listing the keys", err)
	}
	_, err = m.life.Mount(bg, &pb.MountRequest{Config: map[string]string{"db": filepath.Join(t.TempDir(), "x.db"), "strategy": "magic"}})
	if code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "Strategy") {
		t.Fatalf("Mount with a bad strategy: %v, want INVALID_ARGUMENT naming it", err)
	}
	// No session given: a new one, whose name the module reports.
	m.mount(t, map[string]string{"db": filepath.Join(t.TempDir(), "x.db")})
	h, err := m.life.HealthCheck(bg, &pb.Empty{})
	if err != nil || !strings.Contains(h.GetMessage(), "amplifier-") || !m.stderr.waitFor("new session", 10*time.Second) {
		t.Fatalf("new session not reported: %v %v; stderr:\n%s", h, err, m.stderr.String())
	}
	if _, err := m.life.Mount(bg, &pb.MountRequest{}); code(err) != codes.FailedPrecondition {
		t.Fatalf("second Mount: %v, want FAILED_PRECONDITION", err)
	}
	for _, bad := range []*pb.Message{
		nil,
		{Role: pb.Role_ROLE_TOOL, Content: &pb.Message_TextContent{TextContent: "no call id"}},
		{Content: &pb.Message_TextContent{TextContent: "not JSON"}},
		{Role: pb.Role_ROLE_ASSISTANT, Content: &pb.Message_BlockContent{BlockContent: &pb.ContentBlockList{Blocks: []*pb.ContentBlock{{}}}}},
	} {
		if _, err := m.ctx.AddMessage(bg, &pb.AddMessageRequest{Message: bad}); code(err) != codes.InvalidArgument {
			t.Fatalf("AddMessage(%v): %v, want INVALID_ARGUMENT", bad, err)
		}
	}
	if got := m.messages(t); len(got) != 0 {
		t.Fatalf("refused messages were stored: %v", got)
	}
	if _, err := m.ctx.GetMessagesForRequest(bg, &pb.GetMessagesForRequestParams{TokenBudget: -1}); code(err) != codes.InvalidArgument {
		t.Fatalf("negative budget: %v, want INVALID_ARGUMENT", err)
	}
	info, err := m.life.GetModuleInfo(bg, &pb.Empty{})
	if err != nil || info.GetMountPoint() != "context" || !strings.Contains(info.GetConfigSchemaJson(), "memory_files") {
		t.Fatalf("GetModuleInfo: %v %v", info, err)
	}
	m.stop(t)
}

// TestHostDatabaseDefault: without a db key the module uses
// $CTXSTORE_DB, else the XDG data directory, as the ctxstore command does.
func TestHostDatabaseDefault(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name string
		env  []string
		want string
	}{
		{"CTXSTORE_DB", []string{"CTXSTORE_DB=" + filepath.Join(dir, "env.db")}, filepath.Join(dir, "env.db")},
		{"XDG_DATA_HOME", []string{"CTXSTORE_DB=", "XDG_DATA_HOME=" + filepath.Join(dir, "xdg")}, filepath.Join(dir, "xdg", "ctxstore", "ctxstore.db")},
		{"HOME", []string{"CTXSTORE_DB=", "XDG_DATA_HOME=", "HOME=" + filepath.Join(dir, "home")}, filepath.Join(dir, "home", ".local", "share", "ctxstore", "ctxstore.db")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := spawn(t, tt.env...)
			m.mount(t, map[string]string{"session": "e"})
			m.add(t, text(pb.Role_ROLE_USER, "hi"))
			m.stop(t)
			if _, err := os.Stat(tt.want); err != nil {
				t.Fatalf("database not at %s: %v", tt.want, err)
			}
		})
	}
}

// TestHostMemoryFiles: a Mount config key reaches the session's config:
// a fresh session starts with its memory file.
func TestHostMemoryFiles(t *testing.T) {
	dir := t.TempDir()
	notes := filepath.Join(dir, "NOTES.md")
	if err := os.WriteFile(notes, []byte("The user prefers metric units."), 0o600); err != nil {
		t.Fatal(err)
	}
	m := spawn(t)
	m.mount(t, map[string]string{"db": filepath.Join(dir, "ctx.db"), "session": "mem", "memory_files": `["` + notes + `"]`})
	got := m.messages(t)
	if len(got) != 1 || got[0].GetRole() != pb.Role_ROLE_SYSTEM || !strings.Contains(got[0].GetTextContent(), "metric units") {
		t.Fatalf("fresh session with a memory file: %v", got)
	}
	m.stop(t)
}

// TestListenAndUsage: --listen ADDR serves and reports the port; bad
// flags exit 2 with a message.
func TestListenAndUsage(t *testing.T) {
	cmd := exec.Command(binary(t), "--listen", "127.0.0.1:0")
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	line, _ := bufio.NewReader(stdout).ReadString('\n')
	if !strings.HasPrefix(line, "READY:") || strings.TrimSpace(line) == "READY:0" {
		t.Fatalf("--listen 127.0.0.1:0: first line %q, want READY:<port>", line)
	}
	for _, args := range [][]string{{}, {"--port", "1", "--listen", "x:1"}, {"--port", "70000"}, {"--port", "1", "extra"}} {
		out, err := exec.Command(binary(t), args...).CombinedOutput()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), "--port") {
			t.Errorf("%q: %v, output %q; want exit 2 with usage", args, err, out)
		}
	}
}

// TestHostSeveralSessions: a host with two conversations runs a module
// process for each, on one database file; each sees only its session.
func TestHostSeveralSessions(t *testing.T) {
	db := filepath.Join(t.TempDir(), "agent.db")
	a, b := spawn(t), spawn(t)
	a.mount(t, map[string]string{"db": db, "session": "chat-1"})
	b.mount(t, map[string]string{"db": db, "session": "chat-2"})
	var wantA, wantB []*pb.Message
	for i := range 10 {
		ma, mb := text(pb.Role_ROLE_USER, fmt.Sprintf("a%d", i)), text(pb.Role_ROLE_USER, fmt.Sprintf("b%d", i))
		a.add(t, ma)
		b.add(t, mb)
		wantA, wantB = append(wantA, ma), append(wantB, mb)
	}
	equalMessages(t, "chat-1", a.messages(t), wantA)
	equalMessages(t, "chat-2", b.messages(t), wantB)
	a.stop(t)
	b.stop(t)
}

// TestHostLargeMessage: a 6 MiB message (over gRPC's default 4 MiB, under
// ctxstore's 8 MiB limit) is stored and read back whole.
func TestHostLargeMessage(t *testing.T) {
	m := spawn(t)
	m.mount(t, map[string]string{"db": filepath.Join(t.TempDir(), "big.db"), "session": "big"})
	big := text(pb.Role_ROLE_TOOL, strings.Repeat("x", 6<<20))
	big.ToolCallId = "call_big"
	m.add(t, big)
	resp, err := m.ctx.GetMessages(context.Background(), &pb.Empty{}, grpc.MaxCallRecvMsgSize(64<<20))
	if err != nil || len(resp.GetMessages()) != 1 || !proto.Equal(resp.GetMessages()[0], big) {
		t.Fatalf("6 MiB message: %d messages back, %v", len(resp.GetMessages()), err)
	}
	m.stop(t)
}
