package botproc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/line/line-bot-sdk-go/v8/linebot/messaging_api"

	"github.com/linegate/linegate/internal/lineapi"
	"github.com/linegate/linegate/internal/worker"
	"github.com/linegate/linegate/pkg/bot"
)

// The child's calls back, one path each under /calls/{id}/: what a
// handler asks of its event, run by the parent on what its worker bound to
// the record.
const (
	opSend        = "send"
	opPush        = "push"
	opLoading     = "loading"
	opMarkRead    = "markRead"
	opStepBegin   = "steps/begin"
	opStepFinish  = "steps/finish"
	opStepAbandon = "steps/abandon"
	opLoad        = "session/load"
	opSave        = "session/save"
)

// errCallOver answers a call back for a dispatch that has ended (its
// deadline passed, the record moved on): nothing of it runs any more.
var errCallOver = errors.New("botproc: the event's dispatch is over: its call back is refused")

// inFlight is a dispatch the parent is waiting on: the record's context
// (its deadline, trace, event id and held mark) and what its worker bound.
type inFlight struct {
	ctx   context.Context
	bound worker.Bound
}

// request is one call back; each op reads its own fields.
type request struct {
	Target   *target           `json:"target,omitempty"`
	To       string            `json:"to,omitempty"`
	RetryKey string            `json:"retryKey,omitempty"`
	ChatID   string            `json:"chatId,omitempty"`
	Seconds  int               `json:"seconds,omitempty"`
	ReadTok  string            `json:"markAsReadToken,omitempty"`
	Messages []json.RawMessage `json:"messages,omitempty"`
	Step     string            `json:"step,omitempty"`
	Value    []byte            `json:"value,omitempty"`
	Version  int64             `json:"version,omitempty"`
}

// target is lineapi.Target on the wire (the child has no ledger: the
// parent's client adds its own).
type target struct {
	ReplyToken     string    `json:"replyToken,omitempty"`
	EventTime      time.Time `json:"eventTime"`
	To             string    `json:"to,omitempty"`
	WebhookEventID string    `json:"webhookEventId,omitempty"`
	Index          int       `json:"index"`
	Channel        string    `json:"channel,omitempty"`
}

// reply is the answer to a call back.
type reply struct {
	Via     lineapi.Via `json:"via,omitempty"`
	Value   []byte      `json:"value,omitempty"`
	Done    bool        `json:"done,omitempty"`
	Version int64       `json:"version,omitempty"`
	Error   *wireError  `json:"error,omitempty"`
}

// services serves the children's calls back.
func (cl *Client) services() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /calls/{id}/{op...}", func(w http.ResponseWriter, r *http.Request) {
		var rep reply
		defer func() {
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(rep)
		}()
		v, ok := cl.calls.Load(r.PathValue("id"))
		if !ok {
			rep.Error = encodeError(errCallOver)
			return
		}
		f := v.(*inFlight)
		var req request
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxCall)).Decode(&req); err != nil {
			rep.Error = encodeError(fmt.Errorf("botproc: bad call back: %w", err))
			return
		}
		// The record's context, ended early if the child gives up.
		ctx, cancel := context.WithCancel(f.ctx)
		defer cancel()
		defer context.AfterFunc(r.Context(), cancel)()
		rep = f.serve(ctx, r.PathValue("op"), req)
	})
	return mux
}

// serve runs one call back on what the record was bound to.
func (f *inFlight) serve(ctx context.Context, op string, req request) reply {
	var rep reply
	var err error
	b := f.bound
	switch op {
	case opSend, opPush, opLoading, opMarkRead:
		if b.Messenger == nil {
			return reply{Error: encodeError(bot.ErrNoMessenger)}
		}
	case opStepBegin, opStepFinish, opStepAbandon:
		if b.Steps == nil {
			return reply{Error: encodeError(bot.ErrNoSteps)}
		}
	case opLoad, opSave:
		if b.Sessions == nil {
			return reply{Error: encodeError(bot.ErrNoSessions)}
		}
	}
	switch op {
	case opSend:
		if req.Target == nil {
			err = errors.New("botproc: send without a target")
			break
		}
		t := lineapi.Target{ReplyToken: req.Target.ReplyToken, EventTime: req.Target.EventTime, To: req.Target.To,
			WebhookEventID: req.Target.WebhookEventID, Index: req.Target.Index, Channel: req.Target.Channel}
		rep.Via, err = b.Messenger.Send(ctx, t, rawMessages(req.Messages)...)
	case opPush:
		err = b.Messenger.Push(ctx, req.To, req.RetryKey, rawMessages(req.Messages)...)
	case opLoading:
		err = b.Messenger.ShowLoading(ctx, req.ChatID, req.Seconds)
	case opMarkRead:
		err = b.Messenger.MarkAsRead(ctx, req.ReadTok)
	case opStepBegin:
		rep.Value, rep.Done, err = b.Steps.Begin(ctx, req.Step)
	case opStepFinish:
		b.Steps.Finish(ctx, req.Step, req.Value)
	case opStepAbandon:
		b.Steps.Abandon(ctx, req.Step)
	case opLoad:
		rep.Value, rep.Version, err = b.Sessions.Load(ctx, req.ChatID)
	case opSave:
		rep.Version, err = b.Sessions.Save(ctx, req.ChatID, req.Value, req.Version)
	default:
		err = fmt.Errorf("botproc: unknown call back %q", op)
	}
	rep.Error = encodeError(err)
	return rep
}

// rawMessage is a message as the child's SDK encoded it: sent on by the
// parent's client byte for byte.
type rawMessage json.RawMessage

// GetType implements messaging_api.MessageInterface.
func (m rawMessage) GetType() string {
	var h struct {
		Type string `json:"type"`
	}
	_ = json.Unmarshal(m, &h)
	return h.Type
}

// MarshalJSON returns the message as the child encoded it.
func (m rawMessage) MarshalJSON() ([]byte, error) {
	if len(m) == 0 {
		return []byte("null"), nil
	}
	return m, nil
}

func rawMessages(raws []json.RawMessage) []messaging_api.MessageInterface {
	out := make([]messaging_api.MessageInterface, len(raws))
	for i, r := range raws {
		out[i] = rawMessage(r)
	}
	return out
}

// encodeMessages encodes msgs as the SDK puts them in a request (with the
// type discriminator the SDK fills in).
func encodeMessages(msgs []messaging_api.MessageInterface) ([]json.RawMessage, error) {
	b, err := (&messaging_api.PushMessageRequest{To: "-", Messages: msgs}).MarshalJSON()
	if err != nil {
		return nil, fmt.Errorf("botproc: encode messages: %w", err)
	}
	var out struct {
		Messages []json.RawMessage `json:"messages"`
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("botproc: encode messages: %w", err)
	}
	return out.Messages, nil
}

// remote is the child's line to the parent for one dispatch.
type remote struct {
	client *http.Client
	id     string
}

// do makes one call back.
func (p remote) do(ctx context.Context, op string, req request) (reply, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return reply{}, fmt.Errorf("botproc: %s: %w", op, err)
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://parent/calls/"+p.id+"/"+op, bytes.NewReader(body))
	if err != nil {
		return reply{}, fmt.Errorf("botproc: %s: %w", op, err)
	}
	resp, err := p.client.Do(hreq)
	if err != nil {
		if ctx.Err() != nil {
			return reply{}, fmt.Errorf("botproc: %s: %w", op, ctx.Err())
		}
		return reply{}, fmt.Errorf("botproc: %s: the parent process (linegate local): %w", op, err)
	}
	defer resp.Body.Close()
	var rep reply
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxCall)).Decode(&rep); err != nil {
		return reply{}, fmt.Errorf("botproc: %s: the parent's answer: %w", op, err)
	}
	return rep, rep.Error.decode()
}

// remoteMessenger is bot.Messenger in the child: the parent's record's.
type remoteMessenger struct{ p remote }

// Send implements bot.Messenger.
func (m remoteMessenger) Send(ctx context.Context, t lineapi.Target, msgs ...messaging_api.MessageInterface) (lineapi.Via, error) {
	raws, err := encodeMessages(msgs)
	if err != nil {
		return "", err
	}
	rep, err := m.p.do(ctx, opSend, request{Messages: raws, Target: &target{ReplyToken: t.ReplyToken, EventTime: t.EventTime,
		To: t.To, WebhookEventID: t.WebhookEventID, Index: t.Index, Channel: t.Channel}})
	return rep.Via, err
}

// Push implements bot.Messenger.
func (m remoteMessenger) Push(ctx context.Context, to, retryKey string, msgs ...messaging_api.MessageInterface) error {
	raws, err := encodeMessages(msgs)
	if err != nil {
		return err
	}
	_, err = m.p.do(ctx, opPush, request{To: to, RetryKey: retryKey, Messages: raws})
	return err
}

// ShowLoading implements bot.Messenger.
func (m remoteMessenger) ShowLoading(ctx context.Context, chatID string, seconds int) error {
	_, err := m.p.do(ctx, opLoading, request{ChatID: chatID, Seconds: seconds})
	return err
}

// MarkAsRead implements bot.Messenger.
func (m remoteMessenger) MarkAsRead(ctx context.Context, markAsReadToken string) error {
	_, err := m.p.do(ctx, opMarkRead, request{ReadTok: markAsReadToken})
	return err
}

// remoteSteps is bot.Steps in the child: the parent's record's.
type remoteSteps struct{ p remote }

// Begin implements bot.Steps.
func (s remoteSteps) Begin(ctx context.Context, step string) ([]byte, bool, error) {
	rep, err := s.p.do(ctx, opStepBegin, request{Step: step})
	return rep.Value, rep.Done, err
}

// Finish implements bot.Steps. The parent reports a result it could not
// store itself (its log, StepSavesFailed); a call back that fails is
// logged here for the same reason.
func (s remoteSteps) Finish(ctx context.Context, step string, result []byte) {
	if _, err := s.p.do(ctx, opStepFinish, request{Step: step, Value: result}); err != nil {
		logCallBack("step result not saved: a retry after the claim expires runs the step again", step, err)
	}
}

// Abandon implements bot.Steps.
func (s remoteSteps) Abandon(ctx context.Context, step string) {
	if _, err := s.p.do(ctx, opStepAbandon, request{Step: step}); err != nil {
		logCallBack("step claim not released: it expires with the function timeout", step, err)
	}
}

// remoteSessions is bot.SessionStore in the child: the parent's record's.
type remoteSessions struct{ p remote }

// Load implements bot.SessionStore.
func (s remoteSessions) Load(ctx context.Context, chatID string) ([]byte, int64, error) {
	rep, err := s.p.do(ctx, opLoad, request{ChatID: chatID})
	return rep.Value, rep.Version, err
}

// Save implements bot.SessionStore.
func (s remoteSessions) Save(ctx context.Context, chatID string, value []byte, version int64) (int64, error) {
	rep, err := s.p.do(ctx, opSave, request{ChatID: chatID, Value: value, Version: version})
	return rep.Version, err
}

// logCallBack logs a call back whose failure the handler is not told of.
func logCallBack(msg, step string, err error) {
	slog.Warn(msg, "step", step, "error", err.Error())
}
