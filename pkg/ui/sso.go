package ui

// ssoLogoutPath ends a single sign-on session (pkg/api's SSOLogoutPath).
const ssoLogoutPath = "/auth/logout"

// WithSSO has the login page offer "Log in with SSO" (pkg/api's
// /auth/login, server.sso) beside the API token's form, and the logout
// end a single sign-on session too.
func (h *Handler) WithSSO() *Handler {
	h.sso = true
	return h
}
