package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/pgowl/pgowl/config"
	"github.com/pgowl/pgowl/internal/gomodule"
)

// buildTimeout bounds building cmd/pgowl, cold cgo build of the parser included;
// processStartTimeout bounds the wait for the built pgowl to answer.
const (
	buildTimeout        = 10 * time.Minute
	processStartTimeout = 30 * time.Second
)

// startPgowlProcess builds cmd/pgowl and runs it as a process of its own in front of nodes, as
// a user deploys it, with the configuration startPgowl gives the pgowl in this process (the
// defaults, warnings and errors logged). Its log goes to log's file when given (pgowl writes it
// there itself, as it writes to a deployment's log), or is kept for the report's warnings.
func startPgowlProcess(ctx context.Context, nodes []config.Node, log pgowlLog) (started pgowlInstance, err error) {
	return startPgowlBinary(ctx, nodes, log, "")
}

// startPgowlBinary is startPgowlProcess with binary, a pgowl built elsewhere (another commit's),
// run instead of the one built from this module; "" builds this module's.
func startPgowlBinary(ctx context.Context, nodes []config.Node, log pgowlLog, binary string) (started pgowlInstance, err error) {
	dir, err := os.MkdirTemp("", "migrationbench-pgowl-")
	if err != nil {
		return pgowlInstance{}, err
	}
	cleanup := func() { os.RemoveAll(dir) }
	if binary == "" {
		binary = filepath.Join(dir, "pgowl")
		// The build has a bound of its own: a cold cgo build of the parser can take longer than the
		// bound on starting the cluster and pgowl.
		buildCtx, cancelBuild := context.WithTimeout(context.WithoutCancel(ctx), buildTimeout)
		defer cancelBuild()
		build := exec.CommandContext(buildCtx, "go", "build", "-o", binary, "./cmd/pgowl")
		build.Dir, err = gomodule.Root(ctx)
		if err != nil {
			cleanup()
			return pgowlInstance{}, err
		}
		if out, err := build.CombinedOutput(); err != nil {
			cleanup()
			return pgowlInstance{}, fmt.Errorf("build pgowl: %v: %s", err, out)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		cleanup()
		return pgowlInstance{}, err
	}
	addr := ln.Addr().String()
	ln.Close()
	// The admin listener is on by default (config.Default), and with it pgowl's observer: every
	// routed unit is recorded (history, metrics) and its labels computed. A free port of its own
	// keeps that work in the measurement without clashing with another pgowl of the sitting.
	adminLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		cleanup()
		return pgowlInstance{}, err
	}
	adminAddr := adminLn.Addr().String()
	adminLn.Close()
	level := "warn"
	switch {
	case log.debug:
		level = "debug"
	case log.path != "":
		level = "info"
	}
	var nodeLines strings.Builder
	for _, n := range nodes {
		fmt.Fprintf(&nodeLines, "  - {name: %s, host: %q, port: %d}\n", n.Name, n.Host, n.Port)
	}
	yaml := fmt.Sprintf("listen: %s\nnodes:\n%susers:\n  - {name: %s, password: %q, auth: scram-sha-256}\nlog: {level: %s}\nadmin: {listen: %s}\n",
		addr, nodeLines.String(), benchUser, benchPassword, level, adminAddr)
	configPath := filepath.Join(dir, "pgowl.yaml")
	if err := os.WriteFile(configPath, []byte(yaml), 0o600); err != nil {
		cleanup()
		return pgowlInstance{}, err
	}
	logs := &warningLog{}
	warnings := logs.lines
	cmd := exec.Command(binary, "serve", "--config", configPath)
	cmd.Stderr = &warningLines{next: logs}
	if log.path != "" {
		file, err := os.Create(log.path)
		if err != nil {
			cleanup()
			return pgowlInstance{}, err
		}
		// pgowl writes to the file itself (no pipe, nothing copied in this process); the
		// warnings are read from it when asked for.
		cmd.Stderr = file
		defer file.Close() // cmd has its own copy once started
		warnings = func() []string { return warningsIn(log.path) }
	}
	if err := cmd.Start(); err != nil {
		cleanup()
		return pgowlInstance{}, err
	}
	exited := waitInBackground(cmd)
	stop := func() {
		terminate(cmd, exited, 30*time.Second)
		cleanup()
	}
	// A pgowl that exits at start (a bad configuration, a port taken) ends the wait at once,
	// with what it logged.
	// The wait has its own bound too, as the build may have used up ctx's.
	waitCtx, cancelWait := context.WithTimeout(context.WithoutCancel(ctx), processStartTimeout)
	defer cancelWait()
	go func() {
		select {
		case <-exited:
			cancelWait()
		case <-waitCtx.Done():
		}
	}()
	if err := waitForPgowl(waitCtx, addr); err != nil {
		select {
		case <-exited:
			err = fmt.Errorf("pgowl exited at start: %s (%v)", strings.Join(warnings(), "; "), err)
		default:
		}
		stop()
		return pgowlInstance{}, err
	}
	return pgowlInstance{addr: addr, warnings: warnings, stop: stop, pid: cmd.Process.Pid}, nil
}

// warningsIn returns the warning lines (and any line not zerolog's) of the log at path.
func warningsIn(path string) []string {
	data, err := os.ReadFile(path)
	if err != nil {
		return []string{fmt.Sprintf("read pgowl's log: %v", err)}
	}
	logs := &warningLog{}
	(&warningLines{next: logs}).Write(data)
	return logs.lines()
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
		if len(line) > 0 && line[0] != '{' { // not zerolog's: a panic, or Go's runtime
			w.next.Write(line)
			w.partial = w.partial[end+1:]
			continue
		}
		for _, level := range []string{`"level":"warn"`, `"level":"error"`, `"level":"fatal"`} {
			if bytes.Contains(line, []byte(level)) {
				w.next.Write(line)
				break
			}
		}
		w.partial = w.partial[end+1:]
	}
}

// waitInBackground waits for the started cmd to exit; the channel closes when it has.
func waitInBackground(cmd *exec.Cmd) <-chan struct{} {
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	return exited
}

// terminate asks cmd to stop (SIGTERM, a clean shutdown for pgowl and PgBouncer alike) and kills
// it when it has not exited within grace.
func terminate(cmd *exec.Cmd, exited <-chan struct{}, grace time.Duration) {
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(grace):
		cmd.Process.Kill()
		<-exited
	}
}
