package api

import "testing"

// A session's refresh token opens only with the key of its own id, which
// only its cookie holds.
func TestSealRefresh(t *testing.T) {
	sealed, err := sealRefresh("session-a", "rt-secret")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := openRefresh("session-a", sealed); err != nil || got != "rt-secret" {
		t.Errorf("openRefresh(own id) = %q, %v", got, err)
	}
	if _, err := openRefresh("session-b", sealed); err == nil {
		t.Error("another session's key opened the refresh token")
	}
	if _, err := openRefresh(ssoSessionKey("session-a"), sealed); err == nil {
		t.Error("the state's key of the session opened the refresh token")
	}
	if again, _ := sealRefresh("session-a", "rt-secret"); again == sealed {
		t.Error("two seals of one token are equal: no fresh nonce")
	}
}
