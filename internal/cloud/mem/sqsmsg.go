package mem

import (
	"crypto/md5"
	"encoding/binary"
	"encoding/hex"
	"maps"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/linegate/linegate/internal/cloud/mem/queue"
)

// sendSpec is one message to enqueue, from SendMessage, a batch entry, an
// EventBridge target or an SNS subscription.
type sendSpec struct {
	body        string
	delay       int32 // seconds; 0 = queue default
	attrs       map[string]sqstypes.MessageAttributeValue
	sysAttrs    map[string]sqstypes.MessageSystemAttributeValue
	traceHeader string
	groupID     string // MessageGroupId (FIFO; fair queues accept it too)
	dedupID     string // MessageDeduplicationId (FIFO only)
}

type sendResult struct {
	id, md5Body, md5Attrs, md5Sys, sequence string
}

// validFIFOID reports whether s is a MessageGroupId or
// MessageDeduplicationId SQS takes: 1 to 128 ASCII letters, digits and
// punctuation.
func validFIFOID(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '!' || s[i] > '~' {
			return false
		}
	}
	return true
}

// validateFIFO applies SQS's rules on a message's FIFO parameters: a FIFO
// queue needs a group and an id (or content-based deduplication) and takes
// no per-message delay; a standard queue takes no deduplication id.
func (q *sqsQueue) validateFIFO(s *sendSpec) error {
	if s.groupID != "" && !validFIFOID(s.groupID) {
		return apiErr("InvalidParameterValue", "Value %s for parameter MessageGroupId is invalid. Reason: MessageGroupId can only include alphanumeric and punctuation characters. 1 to 128 in length.", s.groupID)
	}
	if s.dedupID != "" && !validFIFOID(s.dedupID) {
		return apiErr("InvalidParameterValue", "Value %s for parameter MessageDeduplicationId is invalid. Reason: MessageDeduplicationId can only include alphanumeric and punctuation characters. 1 to 128 in length.", s.dedupID)
	}
	if !q.fifo() {
		if s.dedupID != "" {
			return apiErr("InvalidParameterValue", "The request include parameter that is not valid for this queue type")
		}
		return nil
	}
	if s.groupID == "" {
		return apiErr("MissingParameter", "The request must contain the parameter MessageGroupId.")
	}
	if s.dedupID == "" && q.attrs["ContentBasedDeduplication"] != "true" {
		return apiErr("InvalidParameterValue", "The queue should either have ContentBasedDeduplication enabled or MessageDeduplicationId provided explicitly")
	}
	if s.delay != 0 {
		return apiErr("InvalidParameterValue", "Value %d for parameter DelaySeconds is invalid. Reason: The request include parameter that is not valid for this queue type.", s.delay)
	}
	return nil
}

// validateSend checks a message the way SQS does before accepting it.
func (q *sqsQueue) validateSend(s *sendSpec) error {
	if s.body == "" {
		return apiErr("InvalidParameterValue", "The request must contain the parameter MessageBody.")
	}
	if !validBody(s.body) {
		return &sqstypes.InvalidMessageContents{Message: aws.String("Invalid characters found. Valid unicode characters are #x9 | #xA | #xD | #x20 to #xD7FF | #xE000 to #xFFFD | #x10000 to #x10FFFF")}
	}
	if s.delay < 0 || s.delay > maxDelay {
		return apiErr("InvalidParameterValue", "Value %d for parameter DelaySeconds is invalid. Reason: must be between 0 and %d, if provided.", s.delay, maxDelay)
	}
	if err := q.validateFIFO(s); err != nil {
		return err
	}
	if len(s.attrs) > maxMessageAttributes {
		return apiErr("InvalidParameterValue", "Number of message attributes [%d] exceeds the allowed maximum [%d].", len(s.attrs), maxMessageAttributes)
	}
	size := len(s.body)
	for name, a := range s.attrs {
		t := deref(a.DataType)
		switch {
		case strings.HasPrefix(t, "String") || strings.HasPrefix(t, "Number"):
			if a.StringValue == nil {
				return apiErr("InvalidParameterValue", "Message (user) attribute '%s' must contain a non-empty value of type '%s'.", name, t)
			}
		case strings.HasPrefix(t, "Binary"):
			if len(a.BinaryValue) == 0 {
				return apiErr("InvalidParameterValue", "Message (user) attribute '%s' must contain a non-empty value of type 'Binary'.", name)
			}
		default:
			return apiErr("InvalidParameterValue", "The message attribute '%s' has an invalid message attribute type, the set of supported type prefixes is Binary, Number, and String.", name)
		}
		if strings.HasPrefix(t, "Number") {
			if _, err := strconv.ParseFloat(*a.StringValue, 64); err != nil {
				return apiErr("InvalidParameterValue", "Can't cast the value of message (user) attribute '%s' to a number.", name)
			}
		}
		size += len(name) + len(t) + len(deref(a.StringValue)) + len(a.BinaryValue)
	}
	for name, a := range s.sysAttrs {
		if name != "AWSTraceHeader" || deref(a.DataType) != "String" || a.StringValue == nil {
			return apiErr("InvalidParameterValue", "Message system attribute '%s' is not supported: only AWSTraceHeader of type String is.", name)
		}
		s.traceHeader = *a.StringValue
	}
	if max := q.intAttr("MaximumMessageSize", defaultMaxMessageSize); size > max {
		return apiErr("InvalidParameterValue", "One or more parameters are invalid. Reason: Message must be shorter than %d bytes.", max)
	}
	return nil
}

// validBody reports whether every character is one SQS accepts.
func validBody(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		switch {
		case r == 0x9 || r == 0xA || r == 0xD:
		case r >= 0x20 && r <= 0xD7FF:
		case r >= 0xE000 && r <= 0xFFFD:
		case r >= 0x10000 && r <= 0x10FFFF:
		default:
			return false
		}
	}
	return true
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// render builds the SDK message with the attributes the receiver asked for.
func (c *Cloud) render(m queue.Message, in *sqs.ReceiveMessageInput) sqstypes.Message {
	sys := map[string]string{
		"SenderId":                         c.account,
		"SentTimestamp":                    strconv.FormatInt(m.Sent.UnixMilli(), 10),
		"ApproximateReceiveCount":          strconv.Itoa(m.Receives),
		"ApproximateFirstReceiveTimestamp": strconv.FormatInt(m.FirstReceive.UnixMilli(), 10),
		"AWSTraceHeader":                   m.TraceHeader,
		"MessageGroupId":                   m.GroupID,
		"MessageDeduplicationId":           m.DedupID,
		"SequenceNumber":                   m.Sequence,
	}
	maps.DeleteFunc(sys, func(_, v string) bool { return v == "" }) // what the message does not carry
	want := map[string]bool{}
	//lint:ignore SA1019 callers still send the deprecated field and SQS still honours it
	for _, n := range in.AttributeNames {
		want[string(n)] = true
	}
	for _, n := range in.MessageSystemAttributeNames {
		want[string(n)] = true
	}
	attrs := map[string]string{}
	for k, v := range sys {
		if want["All"] || want[k] {
			attrs[k] = v
		}
	}
	ma := map[string]sqstypes.MessageAttributeValue{}
	for name, v := range m.Attributes {
		for _, sel := range in.MessageAttributeNames {
			if sel == "All" || sel == ".*" || sel == name || (strings.HasSuffix(sel, ".*") && strings.HasPrefix(name, strings.TrimSuffix(sel, "*"))) {
				ma[name] = v
				break
			}
		}
	}
	out := sqstypes.Message{
		MessageId:     aws.String(m.ID),
		ReceiptHandle: aws.String(m.Handle),
		Body:          aws.String(m.Body),
		MD5OfBody:     aws.String(md5Hex(m.Body)),
	}
	if len(attrs) > 0 {
		out.Attributes = attrs
	}
	if len(ma) > 0 {
		out.MessageAttributes = ma
		out.MD5OfMessageAttributes = aws.String(md5OfAttributes(ma))
	}
	return out
}

func md5Hex(s string) string {
	sum := md5.Sum([]byte(s))
	return hex.EncodeToString(sum[:])
}

// md5OfAttributes is SQS's MD5OfMessageAttributes: for each attribute in
// name order, the length-prefixed name, the length-prefixed data type, a
// transport byte (1 string, 2 binary) and the length-prefixed value.
func md5OfAttributes(attrs map[string]sqstypes.MessageAttributeValue) string {
	if len(attrs) == 0 {
		return ""
	}
	names := make([]string, 0, len(attrs))
	for k := range attrs {
		names = append(names, k)
	}
	sort.Strings(names)
	h := md5.New()
	put := func(b []byte) {
		var n [4]byte
		binary.BigEndian.PutUint32(n[:], uint32(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	for _, name := range names {
		a := attrs[name]
		put([]byte(name))
		put([]byte(deref(a.DataType)))
		if a.StringValue != nil {
			h.Write([]byte{1})
			put([]byte(*a.StringValue))
		} else {
			h.Write([]byte{2})
			put(a.BinaryValue)
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}
