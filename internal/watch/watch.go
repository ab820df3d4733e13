// Package watch is `linegate local --watch`: it watches the module's Go
// files and, when one changes, rebuilds the bot and swaps the running bot
// process for the new one (package botproc), so a handler edit is live in
// seconds while the local cloud — queues, DLQs, the idempotency table, the
// event log — keeps running with its state. A build that fails leaves the
// previous bot running; a bot process that dies is started again.
package watch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/linegate/linegate/internal/backoff"
	"github.com/linegate/linegate/internal/botproc"
)

// Config says what to watch, how to build and run the bot, and where to
// report.
type Config struct {
	// Root is the tree whose Go files (and go.mod, go.sum) are watched.
	Root string
	// Notice are other files whose change is reported, not acted on
	// (template.yaml: the topology needs a restart).
	Notice []string
	// Build builds the bot into the binary out; on failure it returns the
	// compiler's output.
	Build func(ctx context.Context, out string) ([]byte, error)
	// Command is how a built bot binary is run to serve on socket.
	Command func(bin, socket string) *exec.Cmd
	// Client is what the local worker dispatches through.
	Client *botproc.Client
	// Dir holds the built binaries and the sockets.
	Dir string
	// Out gets one console line per step.
	Out io.Writer
	// Poll is how often the tree is scanned (default 500 ms); Settle how
	// long it must stay unchanged before a rebuild (default 300 ms).
	Poll, Settle time.Duration
	// Grace is how long a replaced bot may finish the events it holds.
	Grace time.Duration
	// Rebuild turns the watching on: without it Run builds and starts the
	// bot once (and starts it again when it dies) and watches no file.
	Rebuild bool
	// Started, when set, is called once the first bot answers.
	Started func()
}

// Run builds and starts the bot, then (with Rebuild) rebuilds and swaps
// it on every change until ctx ends. It returns an error only when the
// first build or start fails.
func Run(ctx context.Context, cfg Config) error {
	if cfg.Poll <= 0 {
		cfg.Poll = 500 * time.Millisecond
	}
	if cfg.Settle <= 0 {
		cfg.Settle = 300 * time.Millisecond
	}
	if cfg.Grace <= 0 {
		cfg.Grace = 30 * time.Second
	}
	w := &watcher{cfg: cfg}
	defer w.stopAll()
	snap := scan(cfg.Root, cfg.Notice)
	if err := w.reload(ctx, 0); err != nil {
		return err
	}
	if cfg.Started != nil {
		cfg.Started()
	}
	if !cfg.Rebuild {
		<-ctx.Done()
		return nil
	}
	for gen := 1; ; {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(cfg.Poll):
		}
		next := scan(cfg.Root, cfg.Notice)
		changed := diff(snap, next)
		if len(changed) == 0 {
			continue
		}
		// Wait for the editor (or git) to finish writing.
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(cfg.Settle):
			}
			again := scan(cfg.Root, cfg.Notice)
			if more := diff(next, again); len(more) == 0 {
				break
			}
			next = again
		}
		changed = diff(snap, next)
		snap = next
		var code []string
		for _, f := range changed {
			if rel, err := filepath.Rel(cfg.Root, f); err == nil && !strings.HasPrefix(rel, "..") {
				f = rel
			}
			if isNotice(f, cfg.Notice) || isNotice(filepath.Join(cfg.Root, f), cfg.Notice) {
				w.say("%s changed: restart linegate local to apply it (--watch reloads the bot's Go code only)", f)
				continue
			}
			code = append(code, f)
		}
		if len(code) == 0 {
			continue
		}
		w.say("%s changed: rebuilding the bot", summary(code))
		if err := w.reload(ctx, gen); err != nil {
			w.say("%v; the previous bot keeps running", err)
			continue
		}
		gen++
	}
}

// watcher runs the bot processes.
type watcher struct {
	cfg Config
	mu  sync.Mutex
	cur *child
}

// child is one running bot process.
type child struct {
	cmd     *exec.Cmd
	hello   botproc.Hello // what it answered when ready
	ready   bool          // it answered: an exit after that is a crash to recover from
	bin     string
	socket  string
	exited  chan struct{}
	retired bool // replaced or stopping: its exit is expected
}

func (w *watcher) say(format string, args ...any) {
	line := fmt.Sprintf("%s  watch     %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
	_, _ = io.WriteString(w.cfg.Out, line)
}

// reload builds generation gen, starts it, swaps it in and retires the
// previous bot.
func (w *watcher) reload(ctx context.Context, gen int) error {
	begin := time.Now()
	bin := filepath.Join(w.cfg.Dir, fmt.Sprintf("bot-%d", gen))
	if out, err := w.cfg.Build(ctx, bin); err != nil {
		for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			w.say("  %s", l)
		}
		return fmt.Errorf("build failed: %w", err)
	}
	c, err := w.start(ctx, bin, gen)
	if err != nil {
		return err
	}
	w.mu.Lock()
	old := w.cur
	w.cur = c
	if old != nil {
		old.retired = true
	}
	w.mu.Unlock()
	w.cfg.Client.Swap(botproc.Socket(c.socket), c.hello)
	if old != nil {
		go w.retire(old)
		w.say("bot rebuilt and live in %s (pid %d; queues, DLQs, idempotency and the event log kept)", time.Since(begin).Round(10*time.Millisecond), c.cmd.Process.Pid)
	} else {
		w.say("bot built and running in its own process (pid %d) in %s", c.cmd.Process.Pid, time.Since(begin).Round(10*time.Millisecond))
	}
	return nil
}

// start runs bin and waits until it answers.
func (w *watcher) start(ctx context.Context, bin string, gen int) (*child, error) {
	socket := filepath.Join(w.cfg.Dir, fmt.Sprintf("bot-%d-%d.sock", gen, time.Now().UnixNano()%1e6))
	cmd := w.cfg.Command(bin, socket)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the bot: %w", err)
	}
	c := &child{cmd: cmd, bin: bin, socket: socket, exited: make(chan struct{})}
	go w.reap(ctx, c, gen)
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	go func() {
		select {
		case <-c.exited:
			cancel() // it will never answer
		case <-rctx.Done():
		}
	}()
	h, err := w.cfg.Client.Ready(rctx, botproc.Socket(socket))
	if err != nil {
		_ = cmd.Process.Kill()
		select {
		case <-c.exited:
			if !errors.Is(err, botproc.ErrProtocol) {
				err = fmt.Errorf("the bot process exited before it was ready (its output is above): %w", err)
			}
		default:
		}
		return nil, err
	}
	w.mu.Lock()
	c.hello, c.ready = h, true
	w.mu.Unlock()
	select {
	case <-c.exited: // between its answer and ready: reap did not restart it
		return nil, errors.New("the bot process exited as soon as it was ready (its output is above)")
	default:
	}
	return c, nil
}

// reap waits for c to exit and, when that was not asked for, starts the
// same binary again.
func (w *watcher) reap(ctx context.Context, c *child, gen int) {
	err := c.cmd.Wait()
	close(c.exited)
	_ = os.Remove(c.socket)
	w.mu.Lock()
	expected := c.retired || w.cur != c && w.cur != nil || !c.ready // start reports an exit before ready
	w.mu.Unlock()
	if expected || ctx.Err() != nil {
		return
	}
	w.say("the bot process exited (%v): starting it again", err)
	if backoff.Sleep(ctx, time.Second) != nil {
		return
	}
	n, err := w.start(ctx, c.bin, gen)
	if err != nil {
		w.say("the bot could not be started again: %v", err)
		return
	}
	w.mu.Lock()
	if w.cur == c {
		w.cur = n
	}
	w.mu.Unlock()
	w.cfg.Client.Swap(botproc.Socket(n.socket), n.hello)
}

// retire lets c finish what it holds (SIGTERM), then kills it after the
// grace period.
func (w *watcher) retire(c *child) {
	_ = c.cmd.Process.Signal(os.Interrupt)
	select {
	case <-c.exited:
	case <-time.After(w.cfg.Grace):
		_ = c.cmd.Process.Kill()
		<-c.exited
	}
	if c.bin != "" {
		w.mu.Lock()
		inUse := w.cur != nil && w.cur.bin == c.bin
		w.mu.Unlock()
		if !inUse {
			_ = os.Remove(c.bin)
		}
	}
}

func (w *watcher) stopAll() {
	w.mu.Lock()
	c := w.cur
	if c != nil {
		c.retired = true
	}
	w.mu.Unlock()
	w.cfg.Client.Swap(nil, botproc.Hello{})
	if c != nil {
		w.retire(c)
	}
}

// stamp is what a scan remembers of a file.
type stamp struct {
	mod  time.Time
	size int64
}

// scan stamps the Go files (not tests: they are not in the bot), go.mod and
// go.sum under root, skipping hidden directories, testdata, vendor and
// node_modules, and the notice files.
func scan(root string, notice []string) map[string]stamp {
	out := map[string]stamp{}
	_ = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "vendor" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if (strings.HasSuffix(name, ".go") && !strings.HasSuffix(name, "_test.go")) || name == "go.mod" || name == "go.sum" {
			if info, err := d.Info(); err == nil {
				out[path] = stamp{info.ModTime(), info.Size()}
			}
		}
		return nil
	})
	for _, f := range notice {
		if info, err := os.Stat(f); err == nil {
			out[f] = stamp{info.ModTime(), info.Size()}
		}
	}
	return out
}

// diff lists the files added, removed or changed from a to b.
func diff(a, b map[string]stamp) []string {
	var out []string
	for f, s := range b {
		if old, ok := a[f]; !ok || old != s {
			out = append(out, f)
		}
	}
	for f := range a {
		if _, ok := b[f]; !ok {
			out = append(out, f)
		}
	}
	return out
}

func isNotice(f string, notice []string) bool {
	for _, n := range notice {
		if f == n {
			return true
		}
	}
	return false
}

func summary(files []string) string {
	if len(files) == 1 {
		return files[0]
	}
	return fmt.Sprintf("%s and %d more", files[0], len(files)-1)
}

// GoBuild returns a Config.Build that runs `go build -o out pkg` in dir.
func GoBuild(dir, pkg string) func(ctx context.Context, out string) ([]byte, error) {
	return func(ctx context.Context, out string) ([]byte, error) {
		cmd := exec.CommandContext(ctx, goBinary(), "build", "-o", out, pkg)
		cmd.Dir = dir
		b, err := cmd.CombinedOutput()
		return b, err
	}
}

func goBinary() string {
	if g := os.Getenv("GO"); g != "" {
		return g
	}
	return "go"
}

// ModuleRoot is the directory of the go.mod that dir is in.
func ModuleRoot(dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", errors.New("no go.mod above " + dir + ": linegate local builds the bot from the Go module it is started in (linegate new DIR writes one)")
		}
	}
}
