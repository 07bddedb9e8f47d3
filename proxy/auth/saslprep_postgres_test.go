package auth

import (
	"context"
	"encoding/base64"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pgowl/pgowl/internal/cluster"
)

// TestSASLPrepMatchesPostgreSQL lets PostgreSQL 15 build the SCRAM verifier of tricky passwords
// and checks that pgowl, given the same salt and iteration count, derives the same StoredKey and
// ServerKey: the SASLprep of a configured password must be PostgreSQL's, or clients whose driver
// prepares the password as libpq does could not log in.
func TestSASLPrepMatchesPostgreSQL(t *testing.T) {
	c := cluster.StartForTest(t, cluster.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := c.Nodes[0].Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	passwords := []string{
		"plain-ascii",
		"I\u00ADX",                    // soft hyphen, mapped to nothing
		"pass\u00A0word",              // non-ASCII space
		"a\u200Bb\u00E9",              // zero width space: a space for PostgreSQL
		"\u2168\u00AA",                // NFKC
		"e\u0301t\u00E9",              // combining sequence
		"pw\u0378\u00E9",              // unassigned in Unicode 3.2: raw
		"\u0627a\u0628",               // bidi violation: raw
		"\u0627\u0628",                // right-to-left only
		"pw\uE000\u00E9",              // private use: raw
		"\u00AD\u00AD",                // maps to nothing: raw
		"caf\u00E9 \u3000 na\u00EFve", // ideographic space
	}
	for i, password := range passwords {
		role := "saslprep_" + strconv.Itoa(i)
		if _, err := conn.Exec(ctx, "SET password_encryption = 'scram-sha-256'"); err != nil {
			t.Fatal(err)
		}
		quoted := "'" + strings.ReplaceAll(password, "'", "''") + "'"
		if _, err := conn.Exec(ctx, "CREATE ROLE "+role+" LOGIN PASSWORD "+quoted); err != nil {
			t.Fatalf("%+q: %v", password, err)
		}
		var verifier string
		if err := conn.QueryRow(ctx, "SELECT rolpassword FROM pg_authid WHERE rolname = $1", role).Scan(&verifier); err != nil {
			t.Fatal(err)
		}
		fromPostgres, err := NewVerifierCredentials(role, verifier)
		if err != nil {
			t.Fatal(err)
		}
		salt, _ := base64.StdEncoding.DecodeString(strings.Split(strings.Split(verifier, "$")[1], ":")[1])
		ours := mustSCRAMCredentials(t, role, password, salt, fromPostgres.iterations)
		if ours.Verifier() != fromPostgres.Verifier() {
			t.Errorf("password %+q: pgowl's verifier differs from PostgreSQL's", password)
		}
	}
}
