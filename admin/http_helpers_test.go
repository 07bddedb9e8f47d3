package admin

import (
	"io"
	"net/http"
	"net/http/httptest"
)

// newTestResponse records a handler's answer; its body goes to body.
func newTestResponse(body io.Writer) http.ResponseWriter {
	return &bodyRecorder{ResponseRecorder: httptest.NewRecorder(), body: body}
}

type bodyRecorder struct {
	*httptest.ResponseRecorder
	body io.Writer
}

func (b *bodyRecorder) Write(p []byte) (int, error) { return b.body.Write(p) }

func newTestRequest(path string) *http.Request { return httptest.NewRequest(http.MethodGet, path, nil) }
