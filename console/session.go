package console

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pbcatalogv1 "github.com/loomrt/loom/proto/pbcatalog/v1"
)

// cookieName is the console's one cookie: the user's ACL token.
const cookieName = "loom_console_token"

// maxTokenBytes bounds a token given to the login form.
const maxTokenBytes = 4 << 10

// errLogin answers an API request that needs a token and has none, or one
// the server does not know.
var errLogin = status.Error(codes.Unauthenticated, "log in with an ACL token")

// token returns the request's ACL token: its cookie's, empty without ACLs.
func (c *Console) token(r *http.Request) (string, error) {
	if !c.cfg.ACLs {
		return "", nil
	}
	ck, err := r.Cookie(cookieName)
	if err != nil || ck.Value == "" {
		return "", errLogin
	}
	return ck.Value, nil
}

// sameOrigin reports whether a form post comes from the console's own
// page, as the browser tells: Sec-Fetch-Site, or where it sends none, the
// Origin header (when it sends one) names this host.
func sameOrigin(r *http.Request) bool {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" {
		return site == "same-origin" || site == "none"
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	u, err := url.Parse(origin)
	return err == nil && u.Host == r.Host
}

// login checks the token of the form against the server (a call it must
// be allowed to make) and keeps it in the session cookie.
func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	if !sameOrigin(r) {
		http.Error(w, "log in from the console's own page", http.StatusForbidden)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxTokenBytes)
	token := r.PostFormValue("token")
	if token == "" {
		http.Redirect(w, r, "/ui/#/login?error=empty", http.StatusSeeOther)
		return
	}
	if _, err := c.cfg.Catalog.ListTypes(userContext(r.Context(), token), &pbcatalogv1.ListTypesRequest{}); err != nil {
		http.Redirect(w, r, "/ui/#/login?error=refused", http.StatusSeeOther)
		return
	}
	http.SetCookie(w, c.cookie(token, 0))
	http.Redirect(w, r, "/ui/", http.StatusSeeOther)
}

// logout forgets the session's token.
func (c *Console) logout(w http.ResponseWriter, r *http.Request) {
	if !sameOrigin(r) {
		http.Error(w, "log out from the console's own page", http.StatusForbidden)
		return
	}
	http.SetCookie(w, c.cookie("", -1))
	http.Redirect(w, r, "/ui/", http.StatusSeeOther)
}

// cookie is the session cookie holding token, for the browser session
// (maxAge 0) or deleting it (maxAge -1).
func (c *Console) cookie(token string, maxAge int) *http.Cookie {
	return &http.Cookie{
		Name: cookieName, Value: token, Path: "/ui/", MaxAge: maxAge,
		HttpOnly: true, Secure: c.cfg.TLS, SameSite: http.SameSiteStrictMode,
	}
}

type sessionView struct {
	ACLs     bool `json:"acls"`
	LoggedIn bool `json:"loggedIn"`
}

func (c *Console) session(r *http.Request, token string) (any, error) {
	return sessionView{ACLs: c.cfg.ACLs, LoggedIn: token != ""}, nil
}

// apiFunc answers an API request with a value to send as JSON.
type apiFunc func(r *http.Request, token string) (any, error)

// api serves fn's answer as JSON, and its error as a JSON {"error": ...}
// with the HTTP status of its gRPC code.
func (c *Console) api(fn apiFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		token, err := c.token(r)
		var v any
		if err == nil || r.URL.Path == "/ui/api/session" {
			v, err = fn(r, token)
		}
		w.Header().Set("Content-Type", "application/json")
		if err != nil {
			w.WriteHeader(httpStatus(err))
			v = map[string]string{"error": status.Convert(err).Message(), "code": status.Code(err).String()}
		}
		_ = json.NewEncoder(w).Encode(v)
	}
}

// errBadRequest marks an error in the request's parameters.
type errBadRequest struct{ msg string }

func (e errBadRequest) Error() string { return e.msg }

// httpStatus is the HTTP status of an API error.
func httpStatus(err error) int {
	var bad errBadRequest
	if errors.As(err, &bad) {
		return http.StatusBadRequest
	}
	switch status.Code(err) {
	case codes.Unauthenticated:
		return http.StatusUnauthorized
	case codes.PermissionDenied:
		return http.StatusForbidden
	case codes.NotFound:
		return http.StatusNotFound
	case codes.InvalidArgument:
		return http.StatusBadRequest
	case codes.ResourceExhausted, codes.Unavailable:
		return http.StatusServiceUnavailable
	default:
		return http.StatusInternalServerError
	}
}
