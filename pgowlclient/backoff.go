package pgowlclient

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// Backoff is a caller's retry budget and the shape of the waits between
// attempts. The n-th wait (before attempt n+1) is drawn uniformly from
// [c/2, c), where c = min(Max, Initial × Multiplier^(n-1)): it grows, and the
// jitter keeps many clients refused at once from coming back together. With a
// Multiplier of 2 or more no wait is shorter than the one before.
//
// The budget is the context's deadline and MaxAttempts, whichever ends
// first. A retry whose wait would end after the deadline is not made: the
// last refusal is returned at once, inside a *BudgetError.
type Backoff struct {
	// Initial is the ceiling of the first wait; 0 means DefaultInitialWait.
	Initial time.Duration
	// Max caps every wait; 0 means DefaultMaxWait.
	Max time.Duration
	// Multiplier is how much the ceiling grows per retry; below 1 means DefaultMultiplier.
	Multiplier float64
	// MaxAttempts bounds the attempts, the first included. 0 means no bound
	// by count when the context has a deadline, and DefaultMaxAttempts
	// otherwise, so that nothing retries forever.
	MaxAttempts int
	// Jitter returns a number in [0, 1) for each wait; nil uses math/rand/v2.
	Jitter func() float64
}

// The values a Backoff's zero fields take.
const (
	// DefaultInitialWait is the ceiling of the first wait.
	DefaultInitialWait = 100 * time.Millisecond
	// DefaultMaxWait caps every wait.
	DefaultMaxWait = 5 * time.Second
	// DefaultMultiplier doubles the ceiling per retry.
	DefaultMultiplier = 2.0
	// DefaultMaxAttempts bounds the attempts when neither MaxAttempts nor
	// the context's deadline does.
	DefaultMaxAttempts = 10
)

func (b Backoff) withDefaults() Backoff {
	if b.Initial <= 0 {
		b.Initial = DefaultInitialWait
	}
	if b.Max <= 0 {
		b.Max = DefaultMaxWait
	}
	if b.Max < b.Initial {
		b.Max = b.Initial
	}
	if b.Multiplier < 1 {
		b.Multiplier = DefaultMultiplier
	}
	if b.Jitter == nil {
		b.Jitter = rand.Float64
	}
	return b
}

// Wait returns the wait before attempt retry+1, retry counting from 1.
func (b Backoff) Wait(retry int) time.Duration {
	b = b.withDefaults()
	ceiling := float64(b.Initial) * math.Pow(b.Multiplier, float64(max(retry, 1)-1))
	ceiling = min(ceiling, float64(b.Max))
	j := b.Jitter()
	if j < 0 || j >= 1 || math.IsNaN(j) {
		j = 0
	}
	return time.Duration(ceiling/2 + j*ceiling/2)
}

// maxAttempts is the count bound in force for ctx; 0 means none.
func (b Backoff) maxAttempts(ctx context.Context) int {
	if b.MaxAttempts > 0 {
		return b.MaxAttempts
	}
	if _, ok := ctx.Deadline(); ok {
		return 0
	}
	return DefaultMaxAttempts
}

// Exhausted says which part of the budget ended the retries.
type Exhausted uint8

const (
	// AttemptsSpent: MaxAttempts attempts were made.
	AttemptsSpent Exhausted = iota + 1
	// DeadlineTooNear: the next wait would end after the context's deadline.
	DeadlineTooNear
	// ContextDone: the context ended during a wait.
	ContextDone
)

var exhaustedNames = [...]string{AttemptsSpent: "attempts spent", DeadlineTooNear: "deadline too near for another wait", ContextDone: "context done"}

// String says what ran out.
func (e Exhausted) String() string {
	if e > 0 && int(e) < len(exhaustedNames) {
		return exhaustedNames[e]
	}
	return "unknown"
}

// BudgetError is returned when a refusal that may be retried was still
// there when the caller's budget ran out. errors.As finds the last *Refusal
// (and its *pgconn.PgError) through it, and the context's error when the
// context ended.
type BudgetError struct {
	// Exhausted says what ran out.
	Exhausted Exhausted
	// Attempts is how many attempts were made.
	Attempts int
	// Elapsed is the time from the first attempt to giving up.
	Elapsed time.Duration
	// Last is the last attempt's refusal.
	Last *Refusal
	// ContextErr is the context's error when Exhausted is ContextDone.
	ContextErr error
}

// Error says what ran out and what pgowl last answered.
func (e *BudgetError) Error() string {
	return fmt.Sprintf("pgowlclient: gave up after %d attempts in %s (%s): %v", e.Attempts, e.Elapsed.Round(time.Millisecond), e.Exhausted, e.Last)
}

// Unwrap returns the last refusal and, if the context ended, its error.
func (e *BudgetError) Unwrap() []error {
	if e.ContextErr != nil {
		return []error{e.Last, e.ContextErr}
	}
	return []error{e.Last}
}

// RetryEvent is passed to Options.OnRetry before each wait.
type RetryEvent struct {
	// Attempt is the attempt that was refused, from 1.
	Attempt int
	// Refusal is its refusal.
	Refusal *Refusal
	// Wait is how long the client waits before the next attempt.
	Wait time.Duration
}

// Options are a client's retry settings.
type Options struct {
	// Backoff is the retry budget and the shape of the waits.
	Backoff Backoff
	// OnRetry, if set, is called before each wait, for example to log the refusal.
	OnRetry func(RetryEvent)
}

// attemptOutcome is what one attempt tells the retry loop besides its error.
type attemptOutcome struct {
	// alone is true when the refused statement can be sent again by itself:
	// the connection is outside a transaction and no row was handed to the caller.
	alone bool
}

// retryable reports whether a refusal of this kind may be retried at the
// given level: a statement alone only for transient refusals; a whole
// transaction also when the transaction was lost.
func retryable(k Kind, wholeTransaction bool) bool {
	return k == Transient || (wholeTransaction && k == TransactionLost)
}

// run makes attempts until one succeeds, fails for a reason retrying cannot
// help, or the budget ends. It records attempts and refusals in res.
func (o Options) run(ctx context.Context, res *Result, wholeTransaction bool, attempt func(ctx context.Context) (attemptOutcome, error)) error {
	b := o.Backoff.withDefaults()
	limit := b.maxAttempts(ctx)
	start := time.Now()
	for n := 1; ; n++ {
		res.Attempts = n
		out, err := attempt(ctx)
		if err == nil {
			return nil
		}
		ref := AsRefusal(err)
		if ref == nil {
			return err
		}
		res.Refusals = append(res.Refusals, ref)
		if !retryable(ref.Kind, wholeTransaction) || !out.alone {
			return ref
		}
		if limit > 0 && n >= limit {
			return &BudgetError{Exhausted: AttemptsSpent, Attempts: n, Elapsed: time.Since(start), Last: ref}
		}
		wait := b.Wait(n)
		if deadline, ok := ctx.Deadline(); ok && time.Now().Add(wait).After(deadline) {
			return &BudgetError{Exhausted: DeadlineTooNear, Attempts: n, Elapsed: time.Since(start), Last: ref}
		}
		if o.OnRetry != nil {
			o.OnRetry(RetryEvent{Attempt: n, Refusal: ref, Wait: wait})
		}
		timer := time.NewTimer(wait)
		select {
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			return &BudgetError{Exhausted: ContextDone, Attempts: n, Elapsed: time.Since(start), Last: ref, ContextErr: ctx.Err()}
		}
	}
}
