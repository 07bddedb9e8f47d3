//go:build !linux

package tcpopt

import (
	"syscall"
	"time"
)

// setUserTimeout does nothing where TCP_USER_TIMEOUT does not exist.
func setUserTimeout(syscall.RawConn, time.Duration) error { return nil }
