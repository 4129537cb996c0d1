package cli

import (
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"net/http"
	"regexp"
	"strconv"
)

// statusHTML is the status page: one HTML file with its style and script
// inline, embedded in the binary; no CDN, no build step. It reads /status
// and writes nothing.
//
//go:embed status.html
var statusHTML []byte

// inline matches the page's inline <style> and <script> bodies.
var inline = regexp.MustCompile(`(?s)<(style|script)>(.*?)</(?:style|script)>`)

// pageCSP allows the page its own inline style and script (by hash) and
// requests to its own origin, and nothing else: no other origin is ever
// contacted, no frame may embed it, no form can be sent.
var pageCSP = func() string {
	hashes := map[string]string{}
	for _, m := range inline.FindAllSubmatch(statusHTML, -1) {
		sum := sha256.Sum256(m[2])
		hashes[string(m[1])] += " 'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
	}
	return "default-src 'none'; connect-src 'self'; img-src 'self'; style-src" + hashes["style"] +
		"; script-src" + hashes["script"] + "; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
}()

// statusPage serves the status page at /.
func statusPage() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "read only: the status page answers GET", http.StatusMethodNotAllowed)
			return
		}
		h := w.Header()
		h.Set("Content-Type", "text/html; charset=utf-8")
		h.Set("Content-Length", strconv.Itoa(len(statusHTML)))
		h.Set("Content-Security-Policy", pageCSP)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-cache")
		if r.Method == http.MethodHead {
			return
		}
		_, _ = w.Write(statusHTML)
	})
}
