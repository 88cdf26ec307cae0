package intake

import (
	"crypto/hmac"
	"encoding/base64"
	"encoding/hex"
	"hash"
	"net/textproto"
	"strings"
)

// checkHeaderToken checks that header carries secret, in any of the forms a
// sender configured with a static header sends: the secret verbatim,
// "Bearer <secret>", or Basic credentials whose "user:password" is the
// secret. Every form is compared in constant time.
func checkHeaderToken(d *Delivery, header, secret string) error {
	if secret == "" {
		return unauthenticated("no secret configured")
	}
	header = textproto.CanonicalMIMEHeaderKey(header)
	v := d.Header.Get(header)
	if v == "" {
		return unauthenticated("missing " + header + " header")
	}
	ok := secureEqual(v, secret)
	if scheme, cred, found := strings.Cut(v, " "); found {
		cred = strings.TrimSpace(cred)
		switch {
		case strings.EqualFold(scheme, "Bearer"):
			ok = secureEqual(cred, secret) || ok
		case strings.EqualFold(scheme, "Basic"):
			if raw, err := base64.StdEncoding.DecodeString(cred); err == nil {
				ok = secureEqual(string(raw), secret) || ok
			}
		}
	}
	if !ok {
		return unauthenticated("wrong token in " + header + " header")
	}
	return nil
}

// checkHMAC checks that sig is the hex HMAC of d's raw body keyed with
// secret, after stripping prefix (e.g. "sha256="). header names where sig
// came from, for the error.
func checkHMAC(d *Delivery, newHash func() hash.Hash, secret, header, sig, prefix string) error {
	if secret == "" {
		return unauthenticated("no secret configured")
	}
	if sig == "" {
		return unauthenticated("missing " + header + " header")
	}
	hexSig, ok := strings.CutPrefix(sig, prefix)
	if !ok {
		return unauthenticated(header + " is not " + prefix + "<hex>")
	}
	got, err := hex.DecodeString(strings.TrimSpace(hexSig))
	if err != nil {
		return unauthenticated(header + " is not " + prefix + "<hex>")
	}
	mac := hmac.New(newHash, []byte(secret))
	mac.Write(d.Body)
	if !hmac.Equal(got, mac.Sum(nil)) {
		return unauthenticated("signature mismatch in " + header)
	}
	return nil
}

// checkPathToken checks the token of /hooks/<receiver>/<token>, for senders
// that cannot sign or send a header (Docker Hub, Quay, Flagger, Tekton).
func checkPathToken(d *Delivery, secret string) error {
	if secret == "" {
		return unauthenticated("no secret configured")
	}
	if d.PathToken == "" {
		return unauthenticated("no token in the path: post to /hooks/" + d.Receiver + "/<token>")
	}
	if !secureEqual(d.PathToken, secret) {
		return unauthenticated("wrong path token")
	}
	return nil
}
