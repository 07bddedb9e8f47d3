package proxy

import (
	"sync"
	"testing"

	"github.com/pgowl/pgowl/classify"
)

// TestStatementIDsAreUniqueAcrossSessions: a backend connection remembers
// which unnamed statement it holds by id, and a Bind of a session's unnamed
// statement skips the Parse when the ids match. Two sessions' statements with
// one id would make one session run the other's SQL.
func TestStatementIDsAreUniqueAcrossSessions(t *testing.T) {
	srv := &Server{opts: Options{Classifier: classify.New(classify.Options{})}}
	const sessions, perSession = 8, 20000
	ids := make([][]uint64, sessions)
	var wg sync.WaitGroup
	for i := range sessions {
		sess := &session{srv: srv, database: "app", user: "app"}
		wg.Go(func() {
			for range perSession {
				st := sess.newStatement(parseMessage{query: "SELECT 1"}, []byte("\x00SELECT 1\x00\x00\x00"))
				ids[i] = append(ids[i], st.id)
			}
		})
	}
	wg.Wait()
	seen := make(map[uint64]int, sessions*perSession)
	for i, list := range ids {
		for _, id := range list {
			if other, dup := seen[id]; dup {
				t.Fatalf("statement id %d given to session %d and session %d", id, other, i)
			}
			seen[id] = i
		}
	}
}
