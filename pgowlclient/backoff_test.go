package pgowlclient

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

func fixedJitter(v float64) func() float64 { return func() float64 { return v } }

func TestBackoffWaitsGrowWithinTheirCeilings(t *testing.T) {
	b := Backoff{Initial: 100 * time.Millisecond, Max: time.Second, Multiplier: 2}
	ceilings := []time.Duration{100, 200, 400, 800, 1000, 1000}
	for i, c := range ceilings {
		c *= time.Millisecond
		retry := i + 1
		b.Jitter = fixedJitter(0)
		if got := b.Wait(retry); got != c/2 {
			t.Errorf("retry %d, jitter 0: wait %s, want %s", retry, got, c/2)
		}
		b.Jitter = fixedJitter(0.999999)
		if got := b.Wait(retry); got < c/2 || got >= c {
			t.Errorf("retry %d, jitter ~1: wait %s, want within [%s, %s)", retry, got, c/2, c)
		}
	}
}

func TestBackoffWithRealJitterNeverShrinksAndSpreads(t *testing.T) {
	b := Backoff{Initial: 10 * time.Millisecond, Max: 10 * time.Second, Multiplier: 2}
	seen := map[time.Duration]bool{}
	for range 200 {
		prev := time.Duration(0)
		for retry := 1; retry <= 8; retry++ {
			w := b.Wait(retry)
			if w < prev {
				t.Fatalf("retry %d waits %s, less than the wait before it (%s)", retry, w, prev)
			}
			prev = w
		}
		seen[b.Wait(1)] = true
	}
	if len(seen) < 50 {
		t.Errorf("200 first waits took only %d values: the jitter does not spread them", len(seen))
	}
}

func TestBackoffZeroValueTakesTheDefaults(t *testing.T) {
	b := Backoff{Jitter: fixedJitter(0)}
	if got := b.Wait(1); got != DefaultInitialWait/2 {
		t.Errorf("first wait %s, want %s", got, DefaultInitialWait/2)
	}
	if got := b.Wait(100); got != DefaultMaxWait/2 {
		t.Errorf("hundredth wait %s, want %s", got, DefaultMaxWait/2)
	}
	if got := b.maxAttempts(context.Background()); got != DefaultMaxAttempts {
		t.Errorf("no deadline: max attempts %d, want %d", got, DefaultMaxAttempts)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if got := b.maxAttempts(ctx); got != 0 {
		t.Errorf("with a deadline: max attempts %d, want 0 (the deadline bounds)", got)
	}
}

var (
	transientErr = &pgconn.PgError{Code: "57P03", Message: "pgowl: NO_READABLE_REPLICA: no standby is up"}
	fixableErr   = &pgconn.PgError{Code: "54001", Message: "pgowl: QUERY_COST_EXCEEDED: estimated cost 10 exceeds the limit 5",
		Detail: "guard=g node=pg1 estimated_cost=10 limit=5"}
	replacedErr = &pgconn.PgError{Code: "08006", Message: "pgowl: pg1 is no longer the primary (pg2 was promoted); the transaction on pg1 is gone"}
	lostErr     = &pgconn.PgError{Code: "08006", Message: "pgowl: lost the connection to pg1"}
)

// script returns an attempt function that fails with errs in turn, then succeeds.
func script(errs []error, alone bool, calls *int) func(context.Context) (attemptOutcome, error) {
	return func(context.Context) (attemptOutcome, error) {
		*calls++
		if *calls <= len(errs) {
			return attemptOutcome{alone: alone}, errs[*calls-1]
		}
		return attemptOutcome{alone: alone}, nil
	}
}

func quickOptions(maxAttempts int, retries *[]RetryEvent) Options {
	return Options{
		Backoff: Backoff{Initial: time.Millisecond, Max: 4 * time.Millisecond, MaxAttempts: maxAttempts},
		OnRetry: func(e RetryEvent) { *retries = append(*retries, e) },
	}
}

func TestRunRetriesATransientRefusalUntilItClears(t *testing.T) {
	var calls int
	var retries []RetryEvent
	var res Result
	err := quickOptions(10, &retries).run(context.Background(), &res, false, script([]error{transientErr, transientErr, transientErr}, true, &calls))
	if err != nil {
		t.Fatalf("got %v, want success on the fourth attempt", err)
	}
	if calls != 4 || res.Attempts != 4 || len(res.Refusals) != 3 || len(retries) != 3 {
		t.Errorf("calls %d, attempts %d, refusals %d, retry events %d; want 4, 4, 3, 3", calls, res.Attempts, len(res.Refusals), len(retries))
	}
	for i, e := range retries {
		if e.Attempt != i+1 || e.Refusal.Code != NoReadableReplica || e.Wait <= 0 {
			t.Errorf("retry event %d: %+v", i, e)
		}
	}
}

func TestRunNeverRetriesWhatRetryingCannotFix(t *testing.T) {
	cases := []struct {
		name             string
		err              error
		alone            bool
		wholeTransaction bool
		wantRefusal      bool
	}{
		{"fixable statement", fixableErr, true, false, true},
		{"fixable transaction", fixableErr, true, true, true},
		{"transient, but inside the caller's transaction", transientErr, false, false, true},
		{"primary replaced, statement alone", replacedErr, true, false, true},
		{"lost connection: may have run", lostErr, true, true, false},
		{"not from pgowl", errors.New("boom"), true, false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var calls int
			var retries []RetryEvent
			var res Result
			err := quickOptions(10, &retries).run(context.Background(), &res, tc.wholeTransaction, script([]error{tc.err}, tc.alone, &calls))
			if calls != 1 || len(retries) != 0 {
				t.Errorf("made %d attempts, want 1", calls)
			}
			var ref *Refusal
			if got := errors.As(err, &ref); got != tc.wantRefusal {
				t.Errorf("error %v: is a *Refusal = %t, want %t", err, got, tc.wantRefusal)
			}
			var budget *BudgetError
			if errors.As(err, &budget) {
				t.Errorf("a refusal returned at once must not be a BudgetError: %v", err)
			}
		})
	}
}

func TestRunRetriesALostTransactionOnlyAsAWhole(t *testing.T) {
	var calls int
	var retries []RetryEvent
	var res Result
	err := quickOptions(5, &retries).run(context.Background(), &res, true, script([]error{replacedErr}, true, &calls))
	if err != nil || calls != 2 {
		t.Errorf("whole transaction: err %v after %d attempts, want success on the second", err, calls)
	}
}

func TestRunStopsWhenTheAttemptsAreSpent(t *testing.T) {
	var calls int
	var retries []RetryEvent
	var res Result
	errs := []error{transientErr, transientErr, transientErr, transientErr}
	err := quickOptions(3, &retries).run(context.Background(), &res, false, script(errs, true, &calls))
	var budget *BudgetError
	if !errors.As(err, &budget) || budget.Exhausted != AttemptsSpent || budget.Attempts != 3 {
		t.Fatalf("got %v, want a BudgetError for 3 attempts spent", err)
	}
	if calls != 3 || len(res.Refusals) != 3 {
		t.Errorf("calls %d, refusals %d; want 3, 3", calls, len(res.Refusals))
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr != transientErr || !IsTransient(err) {
		t.Errorf("the budget error does not unwrap to the last refusal")
	}
}

func TestRunDoesNotWaitPastTheDeadline(t *testing.T) {
	var calls int
	opts := Options{Backoff: Backoff{Initial: time.Second, Max: time.Second, Jitter: fixedJitter(0)}}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	var res Result
	start := time.Now()
	err := opts.run(ctx, &res, false, script([]error{transientErr, transientErr}, true, &calls))
	var budget *BudgetError
	if !errors.As(err, &budget) || budget.Exhausted != DeadlineTooNear {
		t.Fatalf("got %v, want a BudgetError: deadline too near", err)
	}
	if calls != 1 {
		t.Errorf("made %d attempts, want 1: a 500ms wait does not fit in 200ms", calls)
	}
	if took := time.Since(start); took > 100*time.Millisecond {
		t.Errorf("gave up after %s, want at once", took)
	}
}

func TestRunStopsWaitingWhenTheContextEnds(t *testing.T) {
	var calls int
	opts := Options{Backoff: Backoff{Initial: 10 * time.Second, Max: 10 * time.Second, MaxAttempts: 5}}
	ctx, cancel := context.WithCancel(context.Background())
	opts.OnRetry = func(RetryEvent) { cancel() }
	var res Result
	err := opts.run(ctx, &res, false, script([]error{transientErr, transientErr}, true, &calls))
	var budget *BudgetError
	if !errors.As(err, &budget) || budget.Exhausted != ContextDone || !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want a BudgetError: context done, wrapping context.Canceled", err)
	}
	if calls != 1 {
		t.Errorf("made %d attempts, want 1", calls)
	}
}
