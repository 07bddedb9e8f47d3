package admin

import (
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
)

// Lifecycle carries out the console's RELOAD, PAUSE and RESUME; the proxy
// side implements it.
type Lifecycle interface {
	// Reload re-reads the configuration and applies it whole, or returns
	// why it was refused (the configuration in force is then unchanged).
	Reload() error
	// Pause holds new units, waits for the transactions in flight to finish,
	// and reports how many are still open when it stops waiting.
	Pause() (stillOpen int, alreadyPaused bool)
	// Resume releases the held units and reports how long they were held.
	Resume() (held time.Duration, wasPaused bool)
}

type lifecycleHolder struct{ Lifecycle }

// SetLifecycle gives the console what RELOAD, PAUSE and RESUME run.
func (r *Recorder) SetLifecycle(l Lifecycle) { r.lifecycle.Store(&lifecycleHolder{l}) }

// SQLSTATEs of the lifecycle commands.
const (
	sqlstateConfigFileError = "F0000"
	sqlstateNotInState      = "55000"
)

// answerLifecycle runs RELOAD, PAUSE or RESUME.
func (r *Recorder) answerLifecycle(c ConsoleConn, command string) {
	holder := r.lifecycle.Load()
	if holder == nil {
		c.Send(consoleError(sqlstateFeatureNotSupported, fmt.Sprintf("pgowl admin console: %s is not available in this process (no lifecycle attached)", command)))
		return
	}
	switch command {
	case "RELOAD":
		if err := holder.Reload(); err != nil {
			c.Send(consoleError(sqlstateConfigFileError, "pgowl admin console: RELOAD refused, the configuration in force is unchanged: "+err.Error()))
			return
		}
	case "PAUSE":
		open, already := holder.Pause()
		if already {
			consoleNotice(c, "pgowl is already paused")
		}
		if open > 0 {
			consoleNotice(c, fmt.Sprintf("paused, but %d transactions were still open when PAUSE stopped waiting for them", open))
		}
	case "RESUME":
		held, wasPaused := holder.Resume()
		if !wasPaused {
			c.Send(consoleError(sqlstateNotInState, "pgowl admin console: pgowl is not paused"))
			return
		}
		consoleNotice(c, fmt.Sprintf("resumed after %s", held.Round(time.Millisecond)))
	}
	c.Send(&pgproto3.CommandComplete{CommandTag: []byte(command)})
}

func consoleNotice(c ConsoleConn, message string) {
	c.Send(&pgproto3.NoticeResponse{Severity: "NOTICE", SeverityUnlocalized: "NOTICE", Code: "00000", Message: message})
}
