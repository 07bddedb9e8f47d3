package catalog

import (
	"sync"
	"sync/atomic"
	"time"
)

// dueMark sets a mark some time after it is armed, unless it is armed again or dropped first. It
// holds the one timer of its kind a database has (the periodic reload, the retry of a failed
// read). epoch counts the arms and drops: a timer armed before the last of them marks nothing,
// even if it fired while the caller held the lock. The owner's lock must be held to call any
// method; the timer takes it itself.
//
// States: idle (no timer) → armed (armAfter) → marked (the timer fired, mark set) → idle (drop, or
// the owner's Swap of the mark). armAfter from any state drops what was before.
type dueMark struct {
	mark  *atomic.Bool
	timer *time.Timer
	epoch uint64
}

// drop stops the timer armed and clears a mark it made.
func (d *dueMark) drop() {
	if d.timer != nil {
		d.timer.Stop()
		d.timer = nil
	}
	d.epoch++
	d.mark.Store(false)
}

// armAfter drops what was armed before and sets the mark delay from now, unless ended says by
// then that nothing should be marked any more. mu is the owner's lock, held by the caller now and
// taken by the timer when it fires.
func (d *dueMark) armAfter(delay time.Duration, mu *sync.Mutex, ended func() bool) {
	d.drop()
	epoch := d.epoch
	d.timer = time.AfterFunc(delay, func() {
		mu.Lock()
		defer mu.Unlock()
		if d.epoch == epoch && !ended() {
			d.mark.Store(true)
		}
	})
}

// stop stops the timer armed, leaving the mark as it is.
func (d *dueMark) stop() {
	if d.timer != nil {
		d.timer.Stop()
	}
}
