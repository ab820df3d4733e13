package linemock

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"unicode/utf16"

	"github.com/google/uuid"
)

// Limits from the Messaging API reference.
const (
	maxMessages       = 5
	maxTextLen        = 5000 // UTF-16 code units, as LINE counts
	maxAltTextLen     = 1500
	maxURLLen         = 2000
	maxQuickReplies   = 13
	minLoadingSeconds = 5
	maxLoadingSeconds = 60
	// defaultLoadingSeconds is what LINE uses when loadingSeconds is omitted.
	defaultLoadingSeconds = 20
)

// outgoing is what a reply and a push both carry besides their recipient.
type outgoing struct {
	messages             []json.RawMessage
	types                []string
	notificationDisabled bool
}

func (o *outgoing) read(c *checker, obj map[string]json.RawMessage) {
	o.messages, o.types = c.messages(obj)
	o.notificationDisabled = c.boolean(obj, "notificationDisabled")
}

type replyRequest struct {
	replyToken string
	outgoing
}

type pushRequest struct {
	to       string
	retryKey string // lower-cased; "" without the header
	outgoing
}

type loadingRequest struct {
	chatID  string
	seconds int
}

// decode reads the JSON object body (see readObject) and builds a T from
// it with fill, which reports every field LINE would refuse to c.
func decode[T any](r *http.Request, fill func(c *checker, obj map[string]json.RawMessage) T) (T, *apiError) {
	obj, e := readObject(r)
	if e != nil {
		var zero T
		return zero, e
	}
	var c checker
	req := fill(&c, obj)
	return req, c.err()
}

func decodeReply(r *http.Request) (replyRequest, *apiError) {
	return decode(r, func(c *checker, obj map[string]json.RawMessage) replyRequest {
		var req replyRequest
		req.replyToken, _ = c.str(obj, "replyToken", "replyToken", true)
		req.read(c, obj)
		return req
	})
}

// decodePush checks the X-Line-Retry-Key header (a UUID, when present)
// before the body, as LINE does.
func decodePush(r *http.Request) (pushRequest, *apiError) {
	retryKey := r.Header.Get(HeaderRetryKey)
	if retryKey != "" {
		if _, err := uuid.Parse(retryKey); err != nil || len(retryKey) != 36 {
			return pushRequest{}, &apiError{status: http.StatusBadRequest, message: "The value of the 'X-Line-Retry-Key' header is invalid"}
		}
	}
	return decode(r, func(c *checker, obj map[string]json.RawMessage) pushRequest {
		req := pushRequest{retryKey: strings.ToLower(retryKey)}
		req.to, _ = c.str(obj, "to", "to", true)
		req.read(c, obj)
		if raw, ok := present(obj, "customAggregationUnits"); ok {
			var units []string
			if err := json.Unmarshal(raw, &units); err != nil {
				c.add("customAggregationUnits", "must be an array of strings")
			}
		}
		return req
	})
}

func decodeLoading(r *http.Request) (loadingRequest, *apiError) {
	return decode(r, func(c *checker, obj map[string]json.RawMessage) loadingRequest {
		req := loadingRequest{seconds: defaultLoadingSeconds}
		req.chatID, _ = c.str(obj, "chatId", "chatId", true)
		if raw, ok := present(obj, "loadingSeconds"); ok {
			var n int
			switch err := json.Unmarshal(raw, &n); {
			case err != nil:
				c.add("loadingSeconds", "must be an integer")
			case n < minLoadingSeconds || n > maxLoadingSeconds:
				c.add("loadingSeconds", fmt.Sprintf("must be between %d and %d", minLoadingSeconds, maxLoadingSeconds))
			case n%5 != 0:
				c.add("loadingSeconds", "must be a multiple of 5")
			default:
				req.seconds = n
			}
		}
		return req
	})
}

// markAsReadRequest is a mark-as-read request's body
// (MarkMessagesAsReadByTokenRequest).
type markAsReadRequest struct {
	token string
}

func decodeMarkAsRead(r *http.Request) (markAsReadRequest, *apiError) {
	return decode(r, func(c *checker, obj map[string]json.RawMessage) markAsReadRequest {
		var req markAsReadRequest
		req.token, _ = c.str(obj, "markAsReadToken", "markAsReadToken", true)
		return req
	})
}

// readObject reads a JSON object body the way LINE does: 413 over the size
// limit, 415 for a non-JSON content type, 400 with a position when the body
// is not a JSON object.
func readObject(r *http.Request) (map[string]json.RawMessage, *apiError) {
	ct := r.Header.Get("Content-Type")
	if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
		return nil, &apiError{
			status:  http.StatusUnsupportedMediaType,
			message: fmt.Sprintf("The content type, '%s', is not supported", ct),
		}
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBodyBytes+1))
	if err != nil {
		return nil, &apiError{status: http.StatusBadRequest, message: "The request body could not be read"}
	}
	if len(body) > maxBodyBytes {
		return nil, &apiError{status: http.StatusRequestEntityTooLarge, message: "Request entity too large"}
	}
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		offset := int64(len(body))
		if se, ok := errors.AsType[*json.SyntaxError](err); ok {
			offset = se.Offset - 1 // Offset counts the offending byte
		}
		return nil, parseError(body, offset)
	}
	if _, ok := v.(map[string]any); !ok {
		return nil, parseError(body, int64(len(body)-len(bytes.TrimLeft(body, " \t\r\n"))))
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(body, &obj); err != nil {
		return nil, parseError(body, 0)
	}
	return obj, nil
}

func parseError(body []byte, offset int64) *apiError {
	line, col := position(body, offset)
	return &apiError{
		status:  http.StatusBadRequest,
		message: fmt.Sprintf("The request body could not be parsed as JSON (line: %d, column: %d)", line, col),
	}
}

// position converts the 0-based index of the offending byte into a 1-based
// line and column.
func position(body []byte, offset int64) (line, col int) {
	if offset > int64(len(body)) {
		offset = int64(len(body))
	}
	if offset < 0 {
		offset = 0
	}
	before := body[:offset]
	line = bytes.Count(before, []byte{'\n'}) + 1
	col = int(offset) - (bytes.LastIndexByte(before, '\n') + 1) + 1
	return line, col
}

// checker collects validation details so one response lists every problem,
// as LINE's "The request body has N error(s)" does.
type checker struct{ details []ErrorDetail }

func (c *checker) add(prop, msg string) {
	c.details = append(c.details, ErrorDetail{Message: msg, Property: prop})
}

func (c *checker) err() *apiError {
	if len(c.details) == 0 {
		return nil
	}
	return &apiError{
		status:  http.StatusBadRequest,
		message: fmt.Sprintf("The request body has %d error(s)", len(c.details)),
		details: c.details,
	}
}

// present returns obj[key] unless it is absent or JSON null.
func present(obj map[string]json.RawMessage, key string) (json.RawMessage, bool) {
	raw, ok := obj[key]
	if !ok || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return nil, false
	}
	return raw, true
}

// str reads a string property; a required one must be present and non-empty.
func (c *checker) str(obj map[string]json.RawMessage, key, prop string, required bool) (string, bool) {
	raw, ok := present(obj, key)
	if !ok {
		if required {
			c.add(prop, "must be specified")
		}
		return "", false
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		c.add(prop, "must be a string")
		return "", false
	}
	if required && s == "" {
		c.add(prop, "May not be empty")
		return "", false
	}
	return s, true
}

func (c *checker) boolean(obj map[string]json.RawMessage, key string) bool {
	raw, ok := present(obj, key)
	if !ok {
		return false
	}
	var b bool
	if err := json.Unmarshal(raw, &b); err != nil {
		c.add(key, "must be a boolean")
	}
	return b
}

func (c *checker) number(obj map[string]json.RawMessage, key, prop string) {
	raw, ok := present(obj, key)
	if !ok {
		c.add(prop, "must be specified")
		return
	}
	var f float64
	if err := json.Unmarshal(raw, &f); err != nil {
		c.add(prop, "must be a number")
	}
}

func (c *checker) object(obj map[string]json.RawMessage, key, prop string) (map[string]json.RawMessage, bool) {
	raw, ok := present(obj, key)
	if !ok {
		c.add(prop, "must be specified")
		return nil, false
	}
	var o map[string]json.RawMessage
	if err := json.Unmarshal(raw, &o); err != nil {
		c.add(prop, "must be an object")
		return nil, false
	}
	return o, true
}

func (c *checker) array(obj map[string]json.RawMessage, key, prop string) ([]json.RawMessage, bool) {
	raw, ok := present(obj, key)
	if !ok {
		c.add(prop, "must be specified")
		return nil, false
	}
	var a []json.RawMessage
	if err := json.Unmarshal(raw, &a); err != nil {
		c.add(prop, "must be an array")
		return nil, false
	}
	return a, true
}

// maxLen checks a string's length in UTF-16 code units, LINE's unit.
func (c *checker) maxLen(prop, s string, limit int) {
	if n := len(utf16.Encode([]rune(s))); n > limit {
		c.add(prop, fmt.Sprintf("Length must be between 0 and %d", limit))
	}
}

func (c *checker) httpsURL(obj map[string]json.RawMessage, key, prop string) {
	s, ok := c.str(obj, key, prop, true)
	if !ok {
		return
	}
	if len(s) > maxURLLen {
		c.add(prop, fmt.Sprintf("Length must be between 0 and %d", maxURLLen))
		return
	}
	u, err := url.Parse(s)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		c.add(prop, "must be a valid HTTPS URL")
	}
}

// messages validates the messages array and returns the raw message objects
// and their types (empty slices when invalid).
func (c *checker) messages(obj map[string]json.RawMessage) ([]json.RawMessage, []string) {
	list, ok := c.array(obj, "messages", "messages")
	if !ok {
		return nil, nil
	}
	if len(list) < 1 || len(list) > maxMessages {
		c.add("messages", fmt.Sprintf("Size must be between 1 and %d", maxMessages))
		return nil, nil
	}
	types := make([]string, len(list))
	for i, raw := range list {
		types[i] = c.message(raw, fmt.Sprintf("messages[%d]", i))
	}
	return list, types
}

// message validates one message object: the common ones (text, flex,
// sticker, image) deeply, the other spec types by their required fields.
func (c *checker) message(raw json.RawMessage, prop string) string {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		c.add(prop, "must be an object")
		return ""
	}
	typ, ok := c.str(m, "type", prop+".type", true)
	if !ok {
		return ""
	}
	p := func(k string) string { return prop + "." + k }
	switch typ {
	case "text", "textV2":
		if s, ok := c.str(m, "text", p("text"), true); ok {
			c.maxLen(p("text"), s, maxTextLen)
		}
	case "flex":
		if s, ok := c.str(m, "altText", p("altText"), true); ok {
			c.maxLen(p("altText"), s, maxAltTextLen)
		}
		if contents, ok := c.object(m, "contents", p("contents")); ok {
			if ct, ok := c.str(contents, "type", p("contents.type"), true); ok && ct != "bubble" && ct != "carousel" {
				c.add(p("contents.type"), "must be one of [bubble, carousel]")
			}
		}
	case "sticker":
		c.str(m, "packageId", p("packageId"), true)
		c.str(m, "stickerId", p("stickerId"), true)
	case "image", "video":
		c.httpsURL(m, "originalContentUrl", p("originalContentUrl"))
		c.httpsURL(m, "previewImageUrl", p("previewImageUrl"))
	case "audio":
		c.httpsURL(m, "originalContentUrl", p("originalContentUrl"))
		c.number(m, "duration", p("duration"))
	case "location":
		c.str(m, "title", p("title"), true)
		c.str(m, "address", p("address"), true)
		c.number(m, "latitude", p("latitude"))
		c.number(m, "longitude", p("longitude"))
	case "imagemap":
		c.str(m, "baseUrl", p("baseUrl"), true)
		if s, ok := c.str(m, "altText", p("altText"), true); ok {
			c.maxLen(p("altText"), s, maxAltTextLen)
		}
		c.object(m, "baseSize", p("baseSize"))
		c.array(m, "actions", p("actions"))
	case "template":
		if s, ok := c.str(m, "altText", p("altText"), true); ok {
			c.maxLen(p("altText"), s, maxAltTextLen)
		}
		if t, ok := c.object(m, "template", p("template")); ok {
			c.str(t, "type", p("template.type"), true)
		}
	case "coupon":
		c.str(m, "couponId", p("couponId"), true)
	default:
		c.add(p("type"), "must be one of [text, textV2, sticker, image, video, audio, location, imagemap, template, flex, coupon]")
		return typ
	}
	if _, ok := present(m, "quickReply"); ok {
		if qr, ok := c.object(m, "quickReply", p("quickReply")); ok {
			if _, ok := present(qr, "items"); ok {
				if items, ok := c.array(qr, "items", p("quickReply.items")); ok && len(items) > maxQuickReplies {
					c.add(p("quickReply.items"), fmt.Sprintf("Size must be between 0 and %d", maxQuickReplies))
				}
			}
		}
	}
	return typ
}
