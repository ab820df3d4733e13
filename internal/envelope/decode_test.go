package envelope

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/linegate/linegate/internal/jsonscan"
)

// referenceDecode is Decode before issue 16: json.Unmarshal into Event,
// then into Detail. The one-pass decoder is fuzzed against it.
func referenceDecode(body []byte) (Event, Detail, error) {
	var ev Event
	if err := json.Unmarshal(body, &ev); err != nil {
		return Event{}, Detail{}, err
	}
	if len(ev.Detail) == 0 || ev.Detail[0] != '{' {
		return Event{}, Detail{}, errors.New("detail is not a JSON object")
	}
	var env Detail
	if err := json.Unmarshal(ev.Detail, &env); err != nil {
		return Event{}, Detail{}, err
	}
	if len(env.Event) == 0 || env.Event[0] != '{' {
		return Event{}, Detail{}, errors.New("detail.event is not a JSON object")
	}
	return ev, env, nil
}

// spanReader records the event it was given to read, skipping it.
type spanReader struct {
	calls int
	raw   []byte
}

func (r *spanReader) ReadEvent(s *jsonscan.Scanner) {
	r.calls++
	start, end, _ := s.Skip()
	r.raw = append(r.raw[:0], s.Bytes()[start:end]...)
}

// checkDecode fails unless Decode and DecodeRecord agree with the reference
// on body.
func checkDecode(t *testing.T, body []byte) {
	t.Helper()
	wantEv, wantEnv, werr := referenceDecode(body)
	ev, env, err := Decode(body)
	if (err != nil) != (werr != nil) {
		t.Fatalf("Decode: %v; reference: %v\n%q", err, werr, body)
	}
	var r spanReader
	renv, rerr := DecodeRecord(string(body), &r)
	if (rerr != nil) != (werr != nil) {
		t.Fatalf("DecodeRecord: %v; reference: %v\n%q", rerr, werr, body)
	}
	if err != nil {
		if !errors.Is(err, ErrMalformed) || !errors.Is(rerr, ErrMalformed) {
			t.Fatalf("errors %v, %v do not wrap ErrMalformed", err, rerr)
		}
		return
	}
	if !reflect.DeepEqual(ev, wantEv) || !reflect.DeepEqual(env, wantEnv) {
		t.Fatalf("Decode %s; reference %s", dump(ev, env), dump(wantEv, wantEnv))
	}
	if !reflect.DeepEqual(renv, wantEnv) {
		t.Fatalf("DecodeRecord %s; reference %s", dump(Event{}, renv), dump(Event{}, wantEnv))
	}
	if r.calls == 0 || string(r.raw) != string(wantEnv.Event) {
		t.Fatalf("the reader read %q (%d calls), the event is %q", r.raw, r.calls, wantEnv.Event)
	}
}

func dump(ev Event, env Detail) string {
	return fmt.Sprintf("%+v %+v (detail %q, event %q)", ev, env, ev.Detail, env.Event)
}

func TestDecodeMatchesReference(t *testing.T) {
	for _, body := range []string{
		`{"version":"0","id":"e1","detail-type":"message","source":"line.webhook","account":"1","time":"2026-11-29T08:00:00Z","region":"us-east-1","resources":[],"detail":{"destination":"U1","receivedAt":"2026-11-29T08:00:00.5Z","chat":"U2","event":{"type":"message"}}}`,
		`{"DETAIL":{"Event":{},"DESTINATION":"d"},"Version":"1"}`,            // keys in another case
		`{"detail":{"destination":5,"event":{}},"detail":{"event":{"a":1}}}`, // only the last detail is decoded
		`{"detail":{"event":{}},"detail":"x"}`,                               // ... even when it is not an object
		`{"detail":{"event":{"x":1},"event":[1]}}`,                           // the last event
		`{"detail":{"event":{},"receivedAt":null,"chat":null},"time":null,"resources":null}`,
		`{"detail":{"event":{},"receivedAt":"yesterday"}}`,
		`{"detail":{"event":{},"receivedAt":"2026-11-29T08:00:00\u005a"}}`, // time.Time does not unescape
		`{"resources":["a",null],"detail":{"event":{}}}`,
		`{"resources":[1],"detail":{"event":{}}}`,
		`{"version":0,"detail":{"event":{}}}`,
		"{\"detail\":{\"event\":{\"t\":\"\xff\"},\"chat\":\"\xfe\"}}", // invalid UTF-8 is encoding/json's to replace
		`null`, `[]`, `"x"`, `{}`, ``, `{"detail":{}}`,
	} {
		checkDecode(t, []byte(body))
	}
}

// FuzzDecodeMatchesReference: SQS bodies are outside input; Decode and
// DecodeRecord read every body exactly as json.Unmarshal does.
func FuzzDecodeMatchesReference(f *testing.F) {
	f.Add([]byte(`{"detail":{"destination":"U1","receivedAt":"2026-11-29T08:00:00Z","event":{"type":"follow"}}}`))
	f.Add([]byte(`{"Detail":{"eVent":{},"chat":"c","CHAT":"d"},"id":"x","ID":null}`))
	f.Add([]byte(`{"detail":{"destination":"U1","channel":"b","Channel":"c","event":{}}}`))
	f.Add([]byte(`{"detail":{"channel":null,"event":{}}}`))
	f.Add([]byte(`{"detail":{"channel":7,"event":{}}}`))
	f.Add([]byte(`{"detail":{"event":{}},"time":"2026-01-02T03:04:05+09:00","resources":["r"]}`))
	f.Add([]byte(`{"detail":[]}`))
	f.Add([]byte(``))
	f.Fuzz(func(t *testing.T, body []byte) { checkDecode(t, body) })
}
