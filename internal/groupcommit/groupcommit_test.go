package groupcommit

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

type req struct {
	Slot
	id  int
	err error
}

// write is an engine's write path over q: lead when told to, else wait.
func write(ctx context.Context, q *Queue[*req], r *req, commit func([]*req)) (Turn, error) {
	turn := q.Join(ctx, r)
	switch turn {
	case Answered:
		return turn, r.Answer(r.err)
	case Left:
		return turn, ctx.Err()
	case Taken:
		<-r.Done()
		return turn, r.Answer(r.err)
	}
	batch := q.Take()
	func() {
		defer q.HandOver()
		commit(batch)
	}()
	<-r.Done()
	return turn, r.Answer(r.err)
}

// TestEveryWriteAnsweredOnce: writers racing through one queue are each
// committed exactly once, in batches that share commits.
func TestEveryWriteAnsweredOnce(t *testing.T) {
	var q Queue[*req]
	var mu sync.Mutex
	committed := map[int]int{}
	commits := 0
	commit := func(batch []*req) {
		time.Sleep(200 * time.Microsecond) // a commit takes a while: others queue
		mu.Lock()
		commits++
		for _, r := range batch {
			committed[r.id]++
		}
		mu.Unlock()
		for _, r := range batch {
			r.Finish()
		}
	}
	const writers, each = 16, 50
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				if _, err := write(context.Background(), &q, &req{id: w*each + i}, commit); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if len(committed) != writers*each {
		t.Fatalf("%d writes committed, want %d", len(committed), writers*each)
	}
	for id, n := range committed {
		if n != 1 {
			t.Fatalf("write %d committed %d times", id, n)
		}
	}
	if commits >= writers*each {
		t.Fatalf("%d commits for %d writes: none shared", commits, writers*each)
	}
	if q.Len() != 0 {
		t.Fatalf("%d writes left queued", q.Len())
	}
}

// TestLeaveWhileQueued: a writer whose context ends while it waits leaves
// the queue untried, handing the leader role on if it had it.
func TestLeaveWhileQueued(t *testing.T) {
	var q Queue[*req]
	hold, release := make(chan struct{}), make(chan struct{})
	var tried atomic.Int32
	commit := func(batch []*req) {
		for _, r := range batch {
			if r.id == 0 {
				close(hold)
				<-release
			}
			tried.Add(1)
			r.Finish()
		}
	}
	go write(context.Background(), &q, &req{id: 0}, commit)
	<-hold
	ctx, cancel := context.WithCancel(context.Background())
	gaveUp := make(chan Turn, 1)
	go func() { turn, _ := write(ctx, &q, &req{id: 1}, commit); gaveUp <- turn }()
	for q.Len() != 1 {
		time.Sleep(time.Millisecond)
	}
	kept := make(chan error, 1)
	go func() { _, err := write(context.Background(), &q, &req{id: 2}, commit); kept <- err }()
	for q.Len() != 2 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	if turn := <-gaveUp; turn != Left {
		t.Fatalf("a writer that gave up while queued: turn %v, want Left", turn)
	}
	close(release)
	if err := <-kept; err != nil {
		t.Fatal(err)
	}
	if n := tried.Load(); n != 2 {
		t.Fatalf("%d writes tried, want 2 (not the one that left)", n)
	}
}

// TestRelay: a callback's panic, recovered by Run or Call on the leader's
// goroutine, is raised again by Answer on its caller's; a callback's
// runtime.Goexit ends its caller's goroutine too.
func TestRelay(t *testing.T) {
	boom := errors.New("boom")
	var s Slot
	if err := s.Run(func() error { panic(boom) }); !errors.Is(err, ErrPanicked) || !s.Caught() {
		t.Fatalf("Run of a panicking fn: %v, caught %v", err, s.Caught())
	}
	if p := recovered(func() { s.Answer(nil) }); p != boom {
		t.Fatalf("Answer raised %v, want the fn's panic value", p)
	}
	var k Slot
	if err := k.Keep(Call(func() error { panic(boom) })); !errors.Is(err, ErrPanicked) || !k.Caught() {
		t.Fatalf("Keep of Call's panic: %v", err)
	}
	if err := k.Keep(Call(func() error { return boom })); err != boom {
		t.Fatalf("Keep of Call's error: %v, want it unchanged", err)
	}
	var g Slot
	done := make(chan struct{})
	go func() {
		defer close(done)
		g.Run(func() error { runtime.Goexit(); return nil })
	}()
	<-done
	if !g.Caught() {
		t.Fatal("a fn that ended its goroutine is not caught")
	}
	ended := make(chan bool, 1)
	go func() {
		returned := false
		defer func() { ended <- returned }()
		g.Answer(nil)
		returned = true
	}()
	if <-ended {
		t.Fatal("Answer returned for a fn that ended its goroutine")
	}
}

func recovered(fn func()) (p any) {
	defer func() { p = recover() }()
	fn()
	return nil
}
