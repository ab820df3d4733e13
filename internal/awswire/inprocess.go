package awswire

import (
	"net/http"
	"net/http/httptest"
)

// InProcess returns an HTTP client that serves every request with h in
// this process, without a socket: an SDK client built with it (and any
// endpoint URL) runs its whole request path — serialisation, signing,
// retries, error decoding — against h. `linegate local` gives its
// in-process worker the DynamoDB client of pkg/idempotency this way, so it
// runs the store code Lambda runs, on the tables a worker under `sam local
// invoke` reaches over the network.
func InProcess(h http.Handler) *http.Client {
	return &http.Client{Transport: inProcess{h}}
}

type inProcess struct{ h http.Handler }

func (p inProcess) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := req.Context().Err(); err != nil {
		return nil, err
	}
	rec := httptest.NewRecorder()
	p.h.ServeHTTP(rec, req)
	res := rec.Result()
	res.Request = req
	return res, nil
}
