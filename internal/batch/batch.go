// Package batch splits what a sender hands to a batch API (SQS
// SendMessageBatch, EventBridge PutEvents) into requests the service takes:
// at most so many entries, whose sizes add up to no more than the request
// limit. The webhook's two senders (the bus publisher and the chat queue
// sender) share it, so both split by the same rule.
package batch

// Split groups items, in order, into runs of at most maxEntries items whose
// summed size stays within maxBytes. An item larger than maxBytes on its
// own gets a run of its own (the service then refuses that entry alone).
func Split[T any](items []T, maxEntries, maxBytes int, size func(T) int) [][]T {
	var out [][]T
	var cur []T
	sum := 0
	for _, it := range items {
		n := size(it)
		if len(cur) == maxEntries || (len(cur) > 0 && sum+n > maxBytes) {
			out = append(out, cur)
			cur, sum = nil, 0
		}
		cur = append(cur, it)
		sum += n
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}
