package ingress

import (
	"errors"
	"io"
	"net/http"

	"github.com/linegate/linegate/internal/signature"
)

// ServeHTTP adapts Handle to net/http, for `linegate local` and any plain HTTP
// deployment. The body is read up to the limit plus one byte, so an oversized
// request is refused without buffering it whole. Two x-line-signature headers
// are treated as no valid signature. Served under a pattern with a
// {channel} wildcard (POST /webhook/{channel}), the request is that
// channel's; otherwise the default channel's.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body []byte
	if r.Method == http.MethodPost {
		var err error
		body, err = io.ReadAll(io.LimitReader(r.Body, h.maxBody+1))
		if err != nil {
			writeJSON(w, http.StatusBadRequest, bodyInvalid)
			return
		}
	}
	sig := ""
	if v := r.Header.Values(signature.Header); len(v) == 1 {
		sig = v[0]
	}
	resp, err := h.HandleChannel(r.Context(), r.PathValue(PathParameter), r.Method, sig, body)
	if errors.Is(err, ErrMethod) {
		w.Header().Set("Allow", http.MethodPost)
	}
	writeJSON(w, resp.Status, resp.Body)
}

func writeJSON(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
