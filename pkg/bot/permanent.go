package bot

// Permanent marks err as a failure that cannot succeed on a retry (the
// input is invalid, the user is gone, the request is forbidden): the worker
// dead-letters the event on its first receive instead of retrying it until
// the queue's redrive limit, and the dead-letter alarm tells the operator.
// Permanent(nil) is nil. The returned error unwraps to err and reads like it.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return permanentError{err}
}

// permanentError is what Permanent returns.
type permanentError struct{ err error }

func (p permanentError) Error() string { return p.err.Error() }

// Unwrap returns the wrapped error.
func (p permanentError) Unwrap() error { return p.err }

// Permanent reports true: see IsPermanent.
func (p permanentError) Permanent() bool { return true }

// IsPermanent reports whether err, or any error it wraps, has a method
// Permanent() bool that returns true: a Permanent error, or an error of
// another package that knows it is final (such as a LINE API error for a
// request LINE will always refuse). Such a failure is dead-lettered at once.
func IsPermanent(err error) bool {
	for err != nil {
		if p, ok := err.(interface{ Permanent() bool }); ok && p.Permanent() {
			return true
		}
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			err = u.Unwrap()
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				if IsPermanent(e) {
					return true
				}
			}
			return false
		default:
			return false
		}
	}
	return false
}
