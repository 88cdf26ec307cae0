package gitops

import (
	"net/url"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"

	flconfig "github.com/flotilla-cd/flotilla/pkg/config"
)

// Auth is how Bump authenticates to the repository: HTTP basic (Username and
// Password), an HTTP token, an SSH private key file, or nothing (set none of
// them). Its String never shows a secret.
type Auth struct {
	// Username and Password are HTTP basic credentials.
	Username string
	Password string
	// Token is an HTTP access token, sent as the basic auth password with
	// Username, or "x-access-token" when Username is empty (GitHub, GitLab,
	// Gitea and Bitbucket all take a token that way).
	Token string
	// SSHKeyFile is the path of a PEM private key, for ssh:// and
	// user@host:path URLs, decrypted with SSHKeyPassphrase when set.
	SSHKeyFile       string
	SSHKeyPassphrase string
	// SSHUser is the SSH user. Default "git".
	SSHUser string
	// SSHKnownHostsFile checks the server's host key. The default is go-git's:
	// the files in $SSH_KNOWN_HOSTS, else ~/.ssh/known_hosts.
	SSHKnownHostsFile string
}

// String names the kind of credential, never the secret.
func (a Auth) String() string {
	switch {
	case a.SSHKeyFile != "":
		return "ssh key " + a.SSHKeyFile
	case a.Token != "":
		return "token"
	case a.Username != "" || a.Password != "":
		return "basic " + a.Username
	default:
		return "none"
	}
}

// method is the go-git auth method, nil for none.
func (a Auth) method() (transport.AuthMethod, error) {
	ssh := a.SSHKeyFile != ""
	http := a.Token != "" || a.Password != ""
	switch {
	case ssh && http:
		return nil, permanentf("%w: auth sets both an SSH key and an HTTP password or token", ErrInvalid)
	case ssh:
		keys, err := gitssh.NewPublicKeysFromFile(or(a.SSHUser, "git"), a.SSHKeyFile, a.SSHKeyPassphrase)
		if err != nil {
			return nil, permanentf("%w: reading SSH key %s: %w", ErrInvalid, a.SSHKeyFile, err)
		}
		if a.SSHKnownHostsFile != "" {
			cb, err := gitssh.NewKnownHostsCallback(a.SSHKnownHostsFile)
			if err != nil {
				return nil, permanentf("%w: reading known hosts %s: %w", ErrInvalid, a.SSHKnownHostsFile, err)
			}
			keys.HostKeyCallback = cb
		}
		return keys, nil
	case a.Token != "":
		return &githttp.BasicAuth{Username: or(a.Username, "x-access-token"), Password: a.Token}, nil
	case a.Username != "" || a.Password != "":
		return &githttp.BasicAuth{Username: a.Username, Password: a.Password}, nil
	default:
		return nil, nil
	}
}

// secrets are the strings no error may show.
func (r Repo) secrets() []string {
	s := []string{r.Auth.Password, r.Auth.Token, r.Auth.SSHKeyPassphrase}
	if u, err := url.Parse(r.URL); err == nil && u.User != nil {
		p, ok := u.User.Password()
		s = append(s, p)
		if !ok && strings.HasPrefix(u.Scheme, "http") { // https://<token>@host/...
			s = append(s, u.User.Username())
		}
	}
	return s
}

// redactURL drops the user info of a URL for messages (config.DisplayURL).
func redactURL(raw string) string { return flconfig.DisplayURL(raw) }

// scrubbed is an error whose message has the secrets blanked out; errors.Is
// and errors.As still see what it wraps.
type scrubbed struct {
	err error
	msg string
}

func (e scrubbed) Error() string { return e.msg }
func (e scrubbed) Unwrap() error { return e.err }

func scrub(err error, secrets []string) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	for _, s := range secrets {
		if len(s) >= 3 { // a shorter "secret" would blank out ordinary words
			msg = strings.ReplaceAll(msg, s, "***")
		}
	}
	if msg == err.Error() {
		return err
	}
	return scrubbed{err: err, msg: msg}
}
