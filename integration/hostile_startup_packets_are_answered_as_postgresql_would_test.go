package integration

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/pgowl/pgowl/config"
)

// rvStartup builds a startup packet with version major.minor and name/value pairs.
func rvStartup(major, minor int, pairs ...string) []byte {
	body := binary.BigEndian.AppendUint32(nil, uint32(major<<16|minor))
	for _, p := range pairs {
		body = append(body, p...)
		body = append(body, 0)
	}
	body = append(body, 0)
	return untypedPacket(body)
}

// rvFirstMessages sends packet to addr and describes up to n backend messages.
func rvFirstMessages(t *testing.T, addr string, packet []byte, n int) string {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.Write(packet)
	fe := pgproto3.NewFrontend(conn, io.Discard)
	var out []string
	conn.SetReadDeadline(time.Now().Add(3 * time.Second))
	for len(out) < n {
		msg, err := fe.Receive()
		if err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				out = append(out, "<waiting>")
			} else {
				out = append(out, "<closed>")
			}
			break
		}
		switch m := msg.(type) {
		case *pgproto3.NegotiateProtocolVersion:
			out = append(out, fmt.Sprintf("NegotiateProtocolVersion(minor=%d, options=%v)", m.NewestMinorProtocol, m.UnrecognizedOptions))
		case *pgproto3.ErrorResponse:
			out = append(out, fmt.Sprintf("E(%s %s: %s)", m.Severity, m.Code, m.Message))
		default:
			out = append(out, fmt.Sprintf("%T", msg))
		}
	}
	return strings.Join(out, " ")
}

// TestHostileStartupPacketsAreAnsweredAsPostgreSQLWould compares pgowl's first answers to odd
// startup packets with PostgreSQL 15's.
func TestHostileStartupPacketsAreAnsweredAsPostgreSQLWould(t *testing.T) {
	c := sharedClusterFor(t)
	o := startOwl(t, c, nil)
	bystander := o.connect(t, nil)
	node := c.Nodes[0].Addr()
	for _, tc := range []struct {
		name   string
		packet []byte
	}{
		{"protocol_3_2", rvStartup(3, 2, "user", appUser, "database", appDatabase)},
		{"protocol_3_2_with_pq_option", rvStartup(3, 2, "user", appUser, "database", appDatabase, "_pq_.rv_option", "1")},
		{"protocol_3_0_with_pq_option", rvStartup(3, 0, "user", appUser, "_pq_.rv_option", "1")},
		{"protocol_3_65535", rvStartup(3, 65535, "user", appUser)},
		{"protocol_4_0", rvStartup(4, 0, "user", appUser)},
		{"protocol_2_0", rvStartup(2, 0, "user", appUser)},
		{"missing_user", rvStartup(3, 0, "database", appDatabase)},
		{"empty_user", rvStartup(3, 0, "user", "")},
		{"non_utf8_user", rvStartup(3, 0, "user", "\xff\xfe\xfd")},
		{"huge_user", rvStartup(3, 0, "user", strings.Repeat("u", 9000))},
		{"duplicate_user", rvStartup(3, 0, "user", appUser, "user", "postgres")},
		{"empty_parameter_name", rvStartup(3, 0, "user", appUser, "", "x")},
		{"replication_database", rvStartup(3, 0, "user", appUser, "replication", "database")},
		{"replication_true", rvStartup(3, 0, "user", appUser, "replication", "true")},
		{"replication_TRUE", rvStartup(3, 0, "user", appUser, "replication", "TRUE")},
		{"replication_bogus", rvStartup(3, 0, "user", appUser, "replication", "bogus")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pg := rvFirstMessages(t, node, tc.packet, 2)
			ow := rvFirstMessages(t, o.addr, tc.packet, 2)
			t.Logf("PostgreSQL: %s", pg)
			t.Logf("pgowl:      %s", ow)
			// The protocol negotiation is the protocol's, not a choice of errors: libpq 18 reads
			// NegotiateProtocolVersion's version field.
			negotiation := regexp.MustCompile(`NegotiateProtocolVersion\([^)]*\)`)
			if want, got := negotiation.FindString(pg), negotiation.FindString(ow); want != got {
				t.Errorf("pgowl negotiated %q, PostgreSQL %q", got, want)
			}
		})
	}
	requireServing(t, o, bystander, "odd startup packets")
}

// TestHostileStartupParametersAreAnsweredAsPostgreSQLWould logs in with odd parameters, through
// pgowl and directly, and compares.
func TestHostileStartupParametersAreAnsweredAsPostgreSQLWould(t *testing.T) {
	c := sharedClusterFor(t)
	o := startOwl(t, c, nil)
	bystander := o.connect(t, nil)
	for _, tc := range []struct {
		name   string
		params map[string]string
	}{
		{"unknown_parameter", map[string]string{"rv_unknown": "1"}},
		{"invalid_client_encoding", map[string]string{"client_encoding": "UTF9"}},
		{"sql_ascii_client_encoding", map[string]string{"client_encoding": "SQL_ASCII"}},
		{"non_utf8_application_name", map[string]string{"application_name": "rv\xff\xfe"}},
		{"huge_application_name", map[string]string{"application_name": strings.Repeat("a", 8000)}},
		{"options_read_only", map[string]string{"options": "-c default_transaction_read_only=on"}},
		{"options_garbage", map[string]string{"options": "-c"}},
		{"custom_placeholder", map[string]string{"myapp.tenant": "T1"}},
		{"session_authorization", map[string]string{"session_authorization": "postgres"}},
		{"role", map[string]string{"role": "postgres"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			try := func(dsn string) string {
				cfg, err := pgconn.ParseConfig(dsn)
				if err != nil {
					t.Fatal(err)
				}
				for k, v := range tc.params {
					cfg.RuntimeParams[k] = v
				}
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				pc, err := pgconn.ConnectConfig(ctx, cfg)
				if err != nil {
					return "login failed: " + err.Error()
				}
				defer pc.Close(ctx)
				res, err := pc.Exec(ctx, "SELECT current_user || ' ' || current_setting('default_transaction_read_only') || ' ' || left(current_setting('application_name'), 10) || ' ' || coalesce(current_setting('myapp.tenant', true), '-')").ReadAll()
				if err != nil {
					return "query failed: " + err.Error()
				}
				return "ok: " + string(res[0].Rows[0][0])
			}
			pg := try(c.Nodes[0].DSN(appUser, appPassword, appDatabase))
			ow := try(o.rvDSN())
			t.Logf("PostgreSQL: %s", pg)
			t.Logf("pgowl:      %s", ow)
			if strings.HasPrefix(pg, "login failed") != strings.HasPrefix(ow, "login failed") {
				t.Errorf("PostgreSQL: %s; pgowl: %s", pg, ow)
			}
		})
	}
	requireServing(t, o, bystander, "odd startup parameters")
}

// TestDistinctStartupParametersDoNotLockOthersOut: every
// distinct set of startup parameters is a login of its own in the pool. A
// client that logs in, one at a time, with more distinct application_names
// than pool.max_per_node must not leave the node's connections all idle
// under logins nobody uses, so that the next client waits and fails.
func TestDistinctStartupParametersDoNotLockOthersOut(t *testing.T) {
	c := sharedClusterFor(t)
	o := rvOwlOnPrimaryOnly(t, c, func(cfg *config.Config) {
		cfg.Pool.MaxPerNode = 3
		cfg.Pool.AcquireTimeout = 2 * time.Second
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for i := range 6 {
		cfg, err := pgx.ParseConfig(o.rvDSN())
		if err != nil {
			t.Fatal(err)
		}
		cfg.RuntimeParams["application_name"] = fmt.Sprintf("rv_app_%d", i)
		conn, err := pgx.ConnectConfig(ctx, cfg)
		if err != nil {
			t.Errorf("login %d with application_name rv_app_%d: %v", i, i, err)
			continue
		}
		var n int
		if err := conn.QueryRow(ctx, "SELECT 1").Scan(&n); err != nil {
			t.Errorf("login %d: SELECT 1: %v", i, err)
		}
		conn.Close(ctx)
	}
	normal := o.connect(t, nil)
	if got := queryInt(t, normal, "normal client", "SELECT 5"); got != 5 {
		t.Errorf("SELECT 5 returned %d", got)
	}
}

// TestRandomCancelRequestsCancelNothing: 300 CancelRequests with random keys
// while a client's statement runs cancel nothing, are answered with a silent
// close, and leave pgowl serving.
func TestRandomCancelRequestsCancelNothing(t *testing.T) {
	c := sharedClusterFor(t)
	o := startOwl(t, c, nil)
	sleeper := o.connect(t, nil)
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_, err := sleeper.Exec(ctx, "SELECT pg_sleep(2)")
		done <- err
	}()
	time.Sleep(200 * time.Millisecond)
	silent := 0
	for i := range 300 {
		conn, err := net.DialTimeout("tcp", o.addr, 5*time.Second)
		if err != nil {
			t.Fatalf("dial %d: %v", i, err)
		}
		body := binary.BigEndian.AppendUint32(nil, 80877102)
		body = binary.BigEndian.AppendUint32(body, uint32(i*7919+1))
		body = binary.BigEndian.AppendUint32(body, uint32(i*104729+3))
		conn.Write(untypedPacket(body))
		data, closed, _ := readUntilClosed(conn, 3*time.Second)
		if closed && len(data) == 0 {
			silent++
		}
		conn.Close()
	}
	if silent != 300 {
		t.Errorf("%d of 300 random CancelRequests got a silent close", silent)
	}
	if err := <-done; err != nil {
		t.Errorf("the running statement failed: %v", err)
	}
	requireServing(t, o, sleeper, "random cancel requests")
}
