package main

import (
	"os"
	"runtime"
	"slices"
	"testing"
)

func TestCPUListsReadAsTasksetWritesThem(t *testing.T) {
	for _, c := range []struct {
		list string
		want []int
	}{
		{"1", []int{1}},
		{"2-3", []int{2, 3}},
		{"4-5,0", []int{0, 4, 5}},
		{"1,1-2", []int{1, 2}},
		{" 3 ", []int{3}},
	} {
		got, err := parseCPUList(c.list)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("parseCPUList(%q) = %v, %v; want %v", c.list, got, err, c.want)
		}
	}
	for _, bad := range []string{"", "a", "3-1", "-1", "1,", "1-", "0-100000"} {
		if got, err := parseCPUList(bad); err == nil {
			t.Errorf("parseCPUList(%q) = %v, want an error", bad, got)
		}
	}
	for _, c := range []struct {
		cpus []int
		want string
	}{{[]int{0}, "0"}, {[]int{0, 1, 2, 5}, "0-2,5"}, {[]int{1, 3, 4}, "1,3-4"}} {
		if got := formatCPUList(c.cpus); got != c.want {
			t.Errorf("formatCPUList(%v) = %q, want %q", c.cpus, got, c.want)
		}
	}
}

func TestNodeCPUsLeaveTheRestToTheClientAndProxies(t *testing.T) {
	split, err := newCPUSplit("1", []int{0, 1})
	if err != nil || !slices.Equal(split.node, []int{1}) || !slices.Equal(split.rest, []int{0}) {
		t.Fatalf("newCPUSplit(1 of 0-1) = %+v, %v; want node 1, rest 0", split, err)
	}
	split, err = newCPUSplit("2-3", []int{0, 1, 2, 3, 4})
	if err != nil || !slices.Equal(split.node, []int{2, 3}) || !slices.Equal(split.rest, []int{0, 1, 4}) {
		t.Fatalf("newCPUSplit(2-3 of 0-4) = %+v, %v; want node 2-3, rest 0-1,4", split, err)
	}
	if split, err := newCPUSplit("0-1", []int{0, 1}); err == nil {
		t.Errorf("newCPUSplit took every CPU for the node (%+v): the client and the proxies would have none", split)
	}
	if split, err := newCPUSplit("7", []int{0, 1}); err == nil {
		t.Errorf("newCPUSplit gave the node a CPU this process may not use (%+v)", split)
	}
	if got := (*cpuSplit)(nil).describe(); got != "Every process runs where the kernel places it." {
		t.Errorf("an unsplit machine is described as %q", got)
	}
}

// TestPinnedProcessKeepsEveryThreadOnItsCPUs pins this test process, every thread of it, to its
// first allowed CPU, then checks each thread, among them the threads started afterwards (each
// goroutine locked to a thread holds it, so the runtime starts others), and restores the CPUs it
// had.
func TestPinnedProcessKeepsEveryThreadOnItsCPUs(t *testing.T) {
	allowed, err := allowedCPUs()
	if err != nil || len(allowed) == 0 {
		t.Fatalf("allowedCPUs() = %v, %v", allowed, err)
	}
	t.Cleanup(func() {
		if err := pinProcess(os.Getpid(), allowed); err != nil {
			t.Errorf("restore this process's CPUs: %v", err)
		}
	})
	first := allowed[:1]
	if err := pinProcess(os.Getpid(), first); err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	defer close(release)
	for range 4 {
		started := make(chan struct{})
		go func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			close(started)
			<-release
		}()
		<-started
	}
	threads, err := threadAffinities(os.Getpid())
	if err != nil || len(threads) < 2 {
		t.Fatalf("threads of this process: %v, %v", threads, err)
	}
	for tid, have := range threads {
		if got := cpusOf(&have); !slices.Equal(got, first) {
			t.Errorf("thread %d runs on CPUs %s, want %s", tid, formatCPUList(got), formatCPUList(first))
		}
	}
}
