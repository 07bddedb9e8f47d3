package pool

import (
	"context"
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/sha256"
	"encoding/base64"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestPassthroughConnectionsDialledAfterARetireStayPooled: a SCRAM passthrough
// connection dialled after RetireDatabase is pooled as a password login's is; only those
// dialled before the retire are retired.
func TestPassthroughConnectionsDialledAfterARetireStayPooled(t *testing.T) {
	node, target, login := startPostgres(t)
	ctx := context.Background()
	pass := passthroughLogin(t, node.QueryRow, login)

	p := New(Options{MaxPerNode: 4, AcquireTimeout: 5 * time.Second})
	defer p.Close()
	p.RetireDatabase(pass.Database) // a default changed once, before this connection was dialled
	time.Sleep(time.Millisecond)
	c, err := p.Acquire(ctx, target, pass)
	if err != nil {
		t.Fatal(err)
	}
	pid := c.PID
	p.Release(c, true)
	if _, idle := p.Stats(target.Node); idle != 1 {
		t.Errorf("a passthrough connection dialled after the retire was not pooled: %d idle", idle)
	}
	again, err := p.Acquire(ctx, target, pass)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Release(again, true)
	if again.PID != pid {
		t.Errorf("passthrough connection dialled after the retire: pid %d, want the pooled %d", again.PID, pid)
	}
}

// TestPassthroughMinIdleIsKeptAfterARetire: with pool.min_idle, a SCRAM passthrough
// login's idle connections are dialled again after RetireDatabase and then stay pooled; they are
// not closed and dialled over and over.
func TestPassthroughMinIdleIsKeptAfterARetire(t *testing.T) {
	node, target, login := startPostgres(t)
	ctx := context.Background()
	pass := passthroughLogin(t, node.QueryRow, login)
	p := New(Options{MaxPerNode: 4, MinIdle: 1, AcquireTimeout: 5 * time.Second})
	defer p.Close()
	c, err := p.Acquire(ctx, target, pass) // remembers the login
	if err != nil {
		t.Fatal(err)
	}
	p.Release(c, true)
	p.RetireDatabase(pass.Database)
	sessions := func() int64 {
		var n int64
		if err := node.QueryRow(ctx, "SELECT pg_stat_force_next_flush(), sessions FROM pg_stat_database WHERE datname = 'postgres'").Scan(nil, &n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	time.Sleep(time.Second)
	before := sessions()
	idleSamples := 0
	for range 20 {
		time.Sleep(250 * time.Millisecond)
		if _, idle := p.Stats(target.Node); idle > 0 {
			idleSamples++
		}
	}
	time.Sleep(time.Second)
	// Each sessions() reads on a new superuser connection of its own: 1 more.
	if dialled := sessions() - before - 1; idleSamples < 15 || dialled > 2 {
		t.Errorf("after the retire, min_idle kept an idle connection in %d of 20 samples, and %d sessions were opened on the node over 5s (want one kept)", idleSamples, dialled)
	}
}

// passthroughLogin returns login as a SCRAM passthrough login: the keys derived from its password
// and the node's verifier, no password.
func passthroughLogin(t *testing.T, queryRow func(context.Context, string, ...any) pgx.Row, login Login) Login {
	t.Helper()
	ctx := context.Background()
	var verifier string
	if err := queryRow(ctx, "SELECT rolpassword FROM pg_authid WHERE rolname = 'app'").Scan(&verifier); err != nil {
		t.Fatal(err)
	}
	// SCRAM-SHA-256$<iter>:<salt>$<StoredKey>:<ServerKey>
	parts := strings.SplitN(strings.TrimPrefix(verifier, "SCRAM-SHA-256$"), "$", 2)
	iterSalt := strings.SplitN(parts[0], ":", 2)
	keys := strings.SplitN(parts[1], ":", 2)
	iter, _ := strconv.Atoi(iterSalt[0])
	salt, _ := base64.StdEncoding.DecodeString(iterSalt[1])
	serverKey, _ := base64.StdEncoding.DecodeString(keys[1])
	salted, err := pbkdf2.Key(sha256.New, login.Password, salt, iter, sha256.Size)
	if err != nil {
		t.Fatal(err)
	}
	mac := hmac.New(sha256.New, salted)
	mac.Write([]byte("Client Key"))
	var sk SCRAMKeys
	copy(sk.ClientKey[:], mac.Sum(nil))
	copy(sk.ServerKey[:], serverKey)
	pass := Login{User: login.User, Database: login.Database, SCRAM: &sk}
	return pass
}
