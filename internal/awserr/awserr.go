// Package awserr says what a failed AWS call means to a caller that retries
// on its own: the error's code, its message, and whether another try can
// succeed. The webhook's two senders (the bus publisher and the chat queue
// sender) share it, so both retry exactly the same failures and report them
// by the service's own codes.
package awserr

import (
	"context"
	"errors"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/smithy-go"
)

// CodeDeadline is the code of a call that ran out of time (its context's
// deadline passed or it was cancelled).
const CodeDeadline = "DeadlineExceeded"

// CodeCallFailed is the code of an error that carries no service code (a
// dropped connection, an emulator's plain error).
const CodeCallFailed = "CallFailed"

// retryables is the SDK's own knowledge of which whole-call errors are worth
// another try: throttling codes, 5xx answers, dropped connections.
var retryables = retry.IsErrorRetryables(retry.DefaultRetryables)

// Classify names a whole-call error and says whether it can pass on another
// try. The service's own error code is kept (AccessDeniedException,
// ResourceNotFoundException, AWS.SimpleQueueService.NonExistentQueue...), so
// a misconfiguration is reported as itself at once instead of as a timeout
// after the deadline. API errors are retried only when the SDK's retry rules
// call them retryable (throttling, 5xx); other errors are retried unless the
// rules rule them out. A context that ended is retryable: the caller's own
// deadline decides whether there is time for it.
func Classify(err error) (code, msg string, retryable bool) {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return CodeDeadline, err.Error(), true
	}
	if ae, ok := errors.AsType[smithy.APIError](err); ok {
		return ae.ErrorCode(), ae.ErrorMessage(), retryables.IsErrorRetryable(err) == aws.TrueTernary
	}
	return CodeCallFailed, err.Error(), retryables.IsErrorRetryable(err) != aws.FalseTernary
}
