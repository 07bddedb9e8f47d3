package monitor

import (
	"testing"
	"time"
)

var t0 = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

// sampleAt is a primary sample sent at ms and answered 2ms later.
func sampleAt(ms int, lsn uint64) walSample {
	return walSample{sentAt: at(ms), doneAt: at(ms + 2), lsn: lsn}
}

func TestStandbyLag(t *testing.T) {
	steady := []walSample{sampleAt(0, 1000), sampleAt(100, 1000), sampleAt(200, 2000), sampleAt(300, 3000)}
	tests := []struct {
		name      string
		history   []walSample
		replay    uint64
		sentAtMS  int
		wantKnown bool
		wantLagMS int
		wantBytes uint64
	}{
		{name: "no history", history: nil, replay: 5, sentAtMS: 10, wantKnown: false},
		{name: "only samples answered after the standby's query", history: []walSample{sampleAt(100, 10)}, replay: 5, sentAtMS: 101, wantKnown: false},
		{name: "idle primary, caught-up standby", history: []walSample{sampleAt(0, 500), sampleAt(100, 500), sampleAt(200, 500)}, replay: 500, sentAtMS: 203, wantKnown: true, wantLagMS: 0},
		{name: "standby ahead of the sampled position", history: steady, replay: 3500, sentAtMS: 303, wantKnown: true, wantLagMS: 0},
		{name: "caught up, but the latest primary sample is old", history: []walSample{sampleAt(0, 500)}, replay: 500, sentAtMS: 2000, wantKnown: true, wantLagMS: 2000},
		{name: "caught up with a sample exactly one interval old", history: []walSample{sampleAt(0, 500)}, replay: 500, sentAtMS: 100, wantKnown: true, wantLagMS: 0},
		{name: "behind: lag from the oldest sample beyond replay", history: steady, replay: 1500, sentAtMS: 350, wantKnown: true, wantLagMS: 150, wantBytes: 1500},
		{name: "behind by a byte of the latest sample", history: steady, replay: 2999, sentAtMS: 305, wantKnown: true, wantLagMS: 5, wantBytes: 1},
		{name: "replay equal to a middle sample counts the next one", history: steady, replay: 2000, sentAtMS: 350, wantKnown: true, wantLagMS: 50, wantBytes: 1000},
		{name: "replay before the whole history: at least its age", history: steady, replay: 10, sentAtMS: 400, wantKnown: true, wantLagMS: 400, wantBytes: 2990},
		{name: "samples answered after the standby's query are ignored", history: append(append([]walSample{}, steady...), walSample{sentAt: at(399), doneAt: at(420), lsn: 9000}), replay: 3000, sentAtMS: 410, wantKnown: true, wantLagMS: 110},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newWALHistory(8)
			for _, s := range tt.history {
				h.add(s)
			}
			got := standbyLag(&h, tt.replay, at(tt.sentAtMS), 100*time.Millisecond)
			if got.known != tt.wantKnown {
				t.Fatalf("known = %v (%s), want %v", got.known, got.whyUnknown, tt.wantKnown)
			}
			if !got.known {
				if got.whyUnknown == "" {
					t.Error("unknown lag without a reason")
				}
				return
			}
			if want := time.Duration(tt.wantLagMS) * time.Millisecond; got.lag != want {
				t.Errorf("lag = %s, want %s", got.lag, want)
			}
			if got.lagBytes != tt.wantBytes {
				t.Errorf("lag bytes = %d, want %d", got.lagBytes, tt.wantBytes)
			}
		})
	}
}

func TestWALHistoryRing(t *testing.T) {
	h := newWALHistory(3)
	if _, ok := h.latest(); ok {
		t.Fatal("empty history has a latest sample")
	}
	for i := 1; i <= 5; i++ {
		h.add(sampleAt(i, uint64(i)))
	}
	if h.len() != 3 {
		t.Fatalf("len = %d, want 3", h.len())
	}
	for i, want := range []uint64{3, 4, 5} {
		if got := h.at(i).lsn; got != want {
			t.Errorf("at(%d) = %d, want %d", i, got, want)
		}
	}
	if s, _ := h.latest(); s.lsn != 5 {
		t.Errorf("latest = %d, want 5", s.lsn)
	}
	h.reset()
	if h.len() != 0 {
		t.Fatalf("len after reset = %d", h.len())
	}
	h.add(sampleAt(9, 9))
	if s, ok := h.latest(); !ok || s.lsn != 9 || h.at(0).lsn != 9 {
		t.Errorf("after reset and add: latest %v %v", s, ok)
	}
}

func TestParseLSN(t *testing.T) {
	tests := []struct {
		text    string
		want    uint64
		wantErr bool
	}{
		{"0/0", 0, false},
		{"0/16B3748", 0x16B3748, false},
		{"16/B374D848", 0x16B374D848, false},
		{"FFFFFFFF/FFFFFFFF", ^uint64(0), false},
		{"", 0, true},
		{"12", 0, true},
		{"x/1", 0, true},
		{"1/", 0, true},
		{"/1", 0, true},
		{"123456789/0", 0, true},
		{"1/-1", 0, true},
	}
	for _, tt := range tests {
		got, err := parseLSN(tt.text)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("parseLSN(%q) = %#x, %v; want %#x, error %v", tt.text, got, err, tt.want, tt.wantErr)
		}
	}
}
