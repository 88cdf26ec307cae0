package natstest

import (
	"context"
	"crypto/x509"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"
)

// Auth are the files a client of a secured cluster (StartSecured) needs,
// and some the servers refuse, for tests of refusals.
type Auth struct {
	// CAFile is the test CA's certificate: it signs the servers' and the
	// client's certificates.
	CAFile string
	// CertFile and KeyFile are a client certificate (and its key) the
	// servers accept.
	CertFile, KeyFile string
	// CredsFile is a user's credentials file (its JWT and nkey seed, as
	// nsc writes it); the user's account has JetStream.
	CredsFile string
	// UnknownCredsFile is the credentials file of a user whose account the
	// servers do not know (signed by the operator, not preloaded).
	UnknownCredsFile string
	// OtherCAFile is a CA that signs none of the servers' certificates.
	OtherCAFile string

	serverCert, serverKey string
	operator              string            // the operator's JWT file
	system                string            // the system account's public key
	accounts              map[string]string // the preloaded accounts' JWTs by public key
}

// StartSecured is Start of a cluster whose client port requires TLS with
// a client certificate (verify: true) and a user's JWT (operator mode: an
// operator, a system account and an account with JetStream, preloaded
// with resolver MEMORY). The files are written under dir/auth; Auth
// returns their paths, URL tls:// URLs. Routes between nodes stay plain.
func StartSecured(ctx context.Context, dir string, n int) (*Cluster, error) {
	auth, err := writeAuth(filepath.Join(dir, "auth"))
	if err != nil {
		return nil, fmt.Errorf("natstest: writing the TLS and JWT files: %w", err)
	}
	return start(ctx, dir, n, auth)
}

// Auth returns the files of a secured cluster's clients; nil when the
// cluster was not started by StartSecured.
func (c *Cluster) Auth() *Auth { return c.auth }

// writeAuth writes the certificates, the JWTs and the credentials files.
func writeAuth(dir string) (*Auth, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	a := &Auth{
		CAFile: filepath.Join(dir, "ca.pem"), CertFile: filepath.Join(dir, "client.pem"), KeyFile: filepath.Join(dir, "client-key.pem"),
		CredsFile: filepath.Join(dir, "user.creds"), UnknownCredsFile: filepath.Join(dir, "unknown.creds"),
		OtherCAFile: filepath.Join(dir, "other-ca.pem"),
		serverCert:  filepath.Join(dir, "server.pem"), serverKey: filepath.Join(dir, "server-key.pem"),
		operator: filepath.Join(dir, "operator.jwt"), accounts: map[string]string{},
	}
	if err := a.writeCerts(); err != nil {
		return nil, err
	}
	if err := a.writeJWTs(); err != nil {
		return nil, err
	}
	return a, nil
}

// writeCerts writes the test CA, the servers' and the client's
// certificates, and another CA.
func (a *Auth) writeCerts() error {
	ca, err := newAuthority("flotilla test CA")
	if err != nil {
		return err
	}
	other, err := newAuthority("flotilla other CA")
	if err != nil {
		return err
	}
	for _, err := range []error{
		ca.writeCert(a.CAFile), other.writeCert(a.OtherCAFile),
		ca.issue("nats-server", x509.ExtKeyUsageServerAuth, a.serverCert, a.serverKey),
		ca.issue("flotilla", x509.ExtKeyUsageClientAuth, a.CertFile, a.KeyFile),
	} {
		if err != nil {
			return err
		}
	}
	return nil
}

// writeJWTs writes the operator's JWT and the users' credentials files,
// and keeps the accounts' JWTs for the servers' configs.
func (a *Auth) writeJWTs() error {
	op, err := newIdentity(nkeys.CreateOperator)
	if err != nil {
		return err
	}
	var accs [3]identity // the system account, the user's, and one the servers do not know
	for i := range accs {
		if accs[i], err = newIdentity(nkeys.CreateAccount); err != nil {
			return err
		}
	}
	sys, acc, unknown := accs[0], accs[1], accs[2]
	if err := writeOperator(op, sys, a.operator); err != nil {
		return err
	}
	a.system = sys.pub
	if a.accounts[sys.pub], err = accountJWT(op, sys, "SYS", false); err != nil {
		return err
	}
	if a.accounts[acc.pub], err = accountJWT(op, acc, "FLOTILLA", true); err != nil {
		return err
	}
	if err := writeCreds(acc, "flotilla", a.CredsFile); err != nil {
		return err
	}
	return writeCreds(unknown, "stranger", a.UnknownCredsFile)
}

// writeOperator writes the JWT of operator op, whose system account is
// sys, to path.
func writeOperator(op, sys identity, path string) error {
	claims := jwt.NewOperatorClaims(op.pub)
	claims.Name, claims.SystemAccount = "flotilla-test", sys.pub
	token, err := claims.Encode(op.kp)
	if err != nil {
		return fmt.Errorf("signing the operator: %w", err)
	}
	return os.WriteFile(path, []byte(token), 0o644)
}

// identity is an nkey pair and its public key.
type identity struct {
	kp  nkeys.KeyPair
	pub string
}

func newIdentity(create func() (nkeys.KeyPair, error)) (identity, error) {
	kp, err := create()
	if err != nil {
		return identity{}, fmt.Errorf("creating an nkey: %w", err)
	}
	pub, err := kp.PublicKey()
	return identity{kp: kp, pub: pub}, err
}

// accountJWT signs account id by the operator; with jetStream, the
// account may keep 64 MB in memory and 1 GB on disk.
func accountJWT(op, id identity, name string, jetStream bool) (string, error) {
	claims := jwt.NewAccountClaims(id.pub)
	claims.Name = name
	if jetStream {
		claims.Limits.JetStreamLimits = jwt.JetStreamLimits{
			MemoryStorage: 64 << 20, DiskStorage: 1 << 30, Streams: jwt.NoLimit, Consumer: jwt.NoLimit, MaxAckPending: jwt.NoLimit,
		}
	}
	token, err := claims.Encode(op.kp)
	if err != nil {
		return "", fmt.Errorf("signing account %s: %w", name, err)
	}
	return token, nil
}

// writeCreds writes the credentials file of a new user of account acc.
func writeCreds(acc identity, name, path string) error {
	user, err := newIdentity(nkeys.CreateUser)
	if err != nil {
		return err
	}
	claims := jwt.NewUserClaims(user.pub)
	claims.Name = name
	token, err := claims.Encode(acc.kp)
	if err != nil {
		return fmt.Errorf("signing user %s: %w", name, err)
	}
	seed, err := user.kp.Seed()
	if err != nil {
		return err
	}
	creds, err := jwt.FormatUserConfig(token, seed)
	if err != nil {
		return err
	}
	return os.WriteFile(path, creds, 0o600)
}

// config is the part of a node's config that secures its client port.
func (a *Auth) config() string {
	var preload strings.Builder
	for _, pub := range slices.Sorted(maps.Keys(a.accounts)) {
		fmt.Fprintf(&preload, "  %s: %q\n", pub, a.accounts[pub])
	}
	return fmt.Sprintf(`tls {
  cert_file: %q
  key_file: %q
  ca_file: %q
  verify: true
  timeout: 2
}
operator: %q
system_account: %s
resolver: MEMORY
resolver_preload: {
%s}
`, a.serverCert, a.serverKey, a.CAFile, a.operator, a.system, preload.String())
}
