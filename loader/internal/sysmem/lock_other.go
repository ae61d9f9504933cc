//go:build unix && !linux

package sysmem

// canLockAnything: without Linux capabilities to read, the limit is taken
// to apply.
func canLockAnything() bool { return false }

// lockedNow: the process's locked memory is not known here.
func lockedNow() (uintptr, bool) { return 0, false }

// statusField: there is no /proc/self/status here.
func statusField(string) (string, bool) { return "", false }
