package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// commandTimeout bounds any single PostgreSQL tool invocation.
const commandTimeout = 2 * time.Minute

// runner runs PostgreSQL tools as the right operating-system user and owns files for it.
type runner struct {
	binDir string
	// owner is the postgres account when running as root, nil otherwise.
	owner *syscall.Credential
	// workDir is the directory commands start in; it must be accessible to owner.
	workDir string
	logf    func(format string, args ...any)
}

// newRunner decides which operating-system user runs PostgreSQL.
func newRunner(binDir string, logf func(string, ...any)) (*runner, error) {
	r := &runner{binDir: binDir, logf: logf}
	if os.Geteuid() != 0 {
		return r, nil
	}
	account, err := user.Lookup(Superuser)
	if err != nil {
		return nil, newError(CodeSetup, "", "running as root needs an operating-system user \"postgres\" to run PostgreSQL", err)
	}
	uid, uidErr := strconv.ParseUint(account.Uid, 10, 32)
	gid, gidErr := strconv.ParseUint(account.Gid, 10, 32)
	if uidErr != nil || gidErr != nil {
		return nil, newError(CodeSetup, "", fmt.Sprintf("user postgres has a non-numeric uid %q or gid %q", account.Uid, account.Gid), nil)
	}
	r.owner = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}
	return r, nil
}

// chown gives path to the postgres account when running as root.
func (r *runner) chown(path string) error {
	if r.owner == nil {
		return nil
	}
	if err := os.Lchown(path, int(r.owner.Uid), int(r.owner.Gid)); err != nil {
		return newError(CodeSetup, "", "chown "+path+" to postgres", err)
	}
	return nil
}

// mkdir creates a private directory owned by the PostgreSQL user.
func (r *runner) mkdir(path string) error {
	if err := os.Mkdir(path, 0o700); err != nil {
		return newError(CodeSetup, "", "create directory "+path, err)
	}
	return r.chown(path)
}

// writeFile writes a file readable by the PostgreSQL user.
func (r *runner) writeFile(path, content string) error {
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		return newError(CodeSetup, "", "write "+path, err)
	}
	return r.chown(path)
}

// appendFile appends to a file readable by the PostgreSQL user.
func (r *runner) appendFile(path, content string) error {
	file, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return newError(CodeSetup, "", "open "+path, err)
	}
	_, writeErr := file.WriteString(content)
	closeErr := file.Close()
	if err := errors.Join(writeErr, closeErr); err != nil {
		return newError(CodeSetup, "", "append to "+path, err)
	}
	return nil
}

// checkReachable makes sure the PostgreSQL user can reach dir: when running as root every
// ancestor must be searchable by postgres, or PostgreSQL fails later with a confusing error.
func (r *runner) checkReachable(dir string) error {
	if r.owner == nil {
		return nil
	}
	for current := dir; ; current = filepath.Dir(current) {
		info, err := os.Stat(current)
		if err != nil {
			return newError(CodeSetup, "", "stat "+current, err)
		}
		stat, ok := info.Sys().(*syscall.Stat_t)
		searchable := info.Mode().Perm()&0o001 != 0
		if ok && stat.Uid == r.owner.Uid {
			searchable = info.Mode().Perm()&0o100 != 0
		} else if ok && stat.Gid == r.owner.Gid {
			searchable = info.Mode().Perm()&0o010 != 0
		}
		if !searchable {
			return newError(CodeSetup, "", fmt.Sprintf(
				"directory %s is not searchable by user postgres; choose a BaseDir postgres can reach (such as /tmp)", current), nil)
		}
		if parent := filepath.Dir(current); parent == current {
			return nil
		}
	}
}

// environment returns the child environment: ours without libpq variables that would redirect tools.
func (r *runner) environment() []string {
	var env []string
	for _, entry := range os.Environ() {
		if strings.HasPrefix(entry, "PG") || strings.HasPrefix(entry, "HOME=") || strings.HasPrefix(entry, "LC_") || strings.HasPrefix(entry, "LANG=") {
			continue
		}
		env = append(env, entry)
	}
	return append(env, "HOME="+r.workDir, "LC_ALL=C", "LANG=C")
}

// run runs a tool from the bin directory and returns its combined output.
// The tool runs in its own process group, which is killed if ctx ends first.
func (r *runner) run(ctx context.Context, node, tool string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, commandTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(r.binDir, tool), args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: r.owner}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	cmd.Dir = r.workDir
	cmd.Env = r.environment()
	var output bytes.Buffer
	cmd.Stdout = &output
	cmd.Stderr = &output
	cmd.Stdin = nil
	started := time.Now()
	err := cmd.Run()
	r.logf("cluster: %s: %s %s (%s)", node, tool, strings.Join(args, " "), time.Since(started).Round(time.Millisecond))
	if err != nil {
		reason := tool + " failed"
		if ctx.Err() != nil {
			reason = tool + " did not finish in time"
		}
		commandErr := newError(CodeCommand, node, reason, err)
		commandErr.Detail = tail(output.String())
		return output.String(), commandErr
	}
	return output.String(), nil
}

// freePorts finds count distinct free TCP ports on 127.0.0.1 by binding port 0.
// All listeners stay open until every port is chosen so no port is returned twice.
func freePorts(count int) ([]int, error) {
	listeners := make([]net.Listener, 0, count)
	defer func() {
		for _, listener := range listeners {
			_ = listener.Close()
		}
	}()
	ports := make([]int, 0, count)
	for range count {
		listener, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, newError(CodeSetup, "", "find a free port on 127.0.0.1", err)
		}
		listeners = append(listeners, listener)
		ports = append(ports, listener.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
