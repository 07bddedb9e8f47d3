package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/pgowl/pgowl/internal/cluster"
	"github.com/pgowl/pgowl/internal/gomodule"
)

// startPgowlProcess builds cmd/pgowl and runs it as a process of its own in front of primary, as
// a user deploys it, with the configuration startPgowl gives the pgowl in this process (the
// defaults, warnings and errors logged). Its log goes to logPath when given (at debug level), or
// is kept for the report's warnings.
func startPgowlProcess(ctx context.Context, primary *cluster.Node, logPath string) (addr string, warnings func() []string, stop func(), err error) {
	dir, err := os.MkdirTemp("", "migrationbench-pgowl-")
	if err != nil {
		return "", nil, nil, err
	}
	cleanup := func() { os.RemoveAll(dir) }
	binary := filepath.Join(dir, "pgowl")
	build := exec.CommandContext(ctx, "go", "build", "-o", binary, "./cmd/pgowl")
	build.Dir, err = gomodule.Root(ctx)
	if err != nil {
		cleanup()
		return "", nil, nil, err
	}
	if out, err := build.CombinedOutput(); err != nil {
		cleanup()
		return "", nil, nil, fmt.Errorf("build pgowl: %v: %s", err, out)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		cleanup()
		return "", nil, nil, err
	}
	addr = ln.Addr().String()
	ln.Close()
	level := "warn"
	if logPath != "" {
		level = "debug"
	}
	yaml := fmt.Sprintf("listen: %s\nnodes:\n  - {name: %s, host: %s, port: %d}\nusers:\n  - {name: %s, password: %q, auth: scram-sha-256}\nlog: {level: %s}\nadmin: {listen: \"\"}\n",
		addr, primary.Name, primary.Host, primary.Port, benchUser, benchPassword, level)
	configPath := filepath.Join(dir, "pgowl.yaml")
	if err := os.WriteFile(configPath, []byte(yaml), 0o600); err != nil {
		cleanup()
		return "", nil, nil, err
	}
	logs := &warningLog{}
	cmd := exec.Command(binary, "serve", "--config", configPath)
	cmd.Stderr = &warningLines{next: logs}
	if logPath != "" {
		file, err := os.Create(logPath)
		if err != nil {
			cleanup()
			return "", nil, nil, err
		}
		defer file.Close() // the process holds its own descriptor
		cmd.Stderr = &teeLines{file: file, next: cmd.Stderr}
	}
	if err := cmd.Start(); err != nil {
		cleanup()
		return "", nil, nil, err
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	stop = func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
		cleanup()
	}
	if err := waitForPgowl(ctx, addr); err != nil {
		stop()
		return "", nil, nil, err
	}
	return addr, logs.lines, stop, nil
}

// warningLines passes on the lines of a JSON log at level warn or above, one per Write.
type warningLines struct {
	next    *warningLog
	partial []byte
}

func (w *warningLines) Write(p []byte) (int, error) {
	w.partial = append(w.partial, p...)
	for {
		end := bytes.IndexByte(w.partial, '\n')
		if end < 0 {
			return len(p), nil
		}
		line := w.partial[:end+1]
		for _, level := range []string{`"level":"warn"`, `"level":"error"`, `"level":"fatal"`} {
			if bytes.Contains(line, []byte(level)) {
				w.next.Write(line)
				break
			}
		}
		w.partial = w.partial[end+1:]
	}
}

// teeLines writes everything to file and passes it on to next.
type teeLines struct {
	file *os.File
	next interface{ Write([]byte) (int, error) }
}

func (t *teeLines) Write(p []byte) (int, error) {
	t.file.Write(p)
	return t.next.Write(p)
}
