package rekortest

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/go-openapi/runtime"
	prototrustroot "github.com/sigstore/protobuf-specs/gen/pb-go/trustroot/v1"
	"github.com/sigstore/rekor/pkg/generated/models"
	"github.com/sigstore/rekor/pkg/types"
	_ "github.com/sigstore/rekor/pkg/types/dsse/v0.0.1"         // registers the dsse kind
	_ "github.com/sigstore/rekor/pkg/types/hashedrekord/v0.0.1" // registers the hashedrekord kind
	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/testing/ca"
	"github.com/sigstore/sigstore-go/pkg/tlog"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
)

// Log is a running Rekor stand-in.
type Log struct {
	// URL is the server's base URL (http://127.0.0.1:port).
	URL string

	vs  *ca.VirtualSigstore
	srv *http.Server

	mu      sync.Mutex
	entries int64
}

// Start serves a new log on a loopback port until Close.
func Start() (*Log, error) {
	vs, err := ca.NewVirtualSigstore()
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	l := &Log{URL: "http://" + ln.Addr().String(), vs: vs}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/v1/log/entries", l.add)
	l.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = l.srv.Serve(ln) }()
	return l, nil
}

// Close stops the server.
func (l *Log) Close() error { return l.srv.Close() }

// Entries counts the entries added.
func (l *Log) Entries() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.entries
}

// apiError is Rekor's error body.
func apiError(w http.ResponseWriter, code int, err error) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]any{"code": code, "message": err.Error()})
}

// add validates and canonicalizes the proposed entry as Rekor does, then
// answers the log entry.
func (l *Log) add(w http.ResponseWriter, r *http.Request) {
	pe, err := models.UnmarshalProposedEntry(io.LimitReader(r.Body, 1<<20), runtime.JSONConsumer())
	if err != nil {
		apiError(w, http.StatusBadRequest, err)
		return
	}
	entry, err := types.CreateVersionedEntry(pe)
	if err != nil {
		apiError(w, http.StatusBadRequest, err)
		return
	}
	body, err := types.CanonicalizeEntry(r.Context(), entry)
	if err != nil {
		apiError(w, http.StatusBadRequest, err)
		return
	}
	anon, uuid, err := l.record(r.Context(), body)
	if err != nil {
		apiError(w, http.StatusInternalServerError, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("ETag", uuid)
	w.Header().Set("Location", "/api/v1/log/entries/"+uuid)
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(models.LogEntry{uuid: anon})
}

func (l *Log) record(_ context.Context, body []byte) (models.LogEntryAnon, string, error) {
	l.mu.Lock()
	idx := l.entries
	l.entries++
	l.mu.Unlock()
	logID, err := l.vs.RekorLogID()
	if err != nil {
		return models.LogEntryAnon{}, "", err
	}
	now := time.Now().Unix()
	b64 := base64.StdEncoding.EncodeToString(body)
	set, err := l.vs.RekorSignPayload(tlog.RekorPayload{Body: b64, IntegratedTime: now, LogIndex: idx, LogID: logID})
	if err != nil {
		return models.LogEntryAnon{}, "", err
	}
	proof, err := l.vs.GetInclusionProof(body)
	if err != nil {
		return models.LogEntryAnon{}, "", err
	}
	leaf := sha256.Sum256(append([]byte{0}, body...))
	return models.LogEntryAnon{
		Body:           b64,
		IntegratedTime: &now,
		LogID:          &logID,
		LogIndex:       &idx,
		Verification:   &models.LogEntryAnonVerification{SignedEntryTimestamp: set, InclusionProof: proof},
	}, hex.EncodeToString(leaf[:]), nil
}

// PublicKeyPEM is the log's public key (SIGSTORE_REKOR_PUBLIC_KEY, which
// cosign's attached-signature path checks its entries with).
func (l *Log) PublicKeyPEM() ([]byte, error) {
	for _, tl := range l.vs.RekorLogs() {
		return cryptoutils.MarshalPublicKeyToPEM(tl.PublicKey)
	}
	return nil, fmt.Errorf("no log key")
}

// TrustedRoot is the trusted material naming this log, the
// VirtualSigstore's certificate authority and cas (a Fulcio stand-in's,
// fulciotest.Server.CA).
func (l *Log) TrustedRoot(cas ...root.CertificateAuthority) (*root.TrustedRoot, error) {
	logs := map[string]*root.TransparencyLog{}
	for id, tl := range l.vs.RekorLogs() {
		// The VirtualSigstore's ID is the hex of the key's hash, as text;
		// a trusted_root.json holds the hash itself.
		raw, err := hex.DecodeString(id)
		if err != nil {
			return nil, err
		}
		tl.ID = raw
		logs[id] = tl
		// Valid from before the log started for a day: the
		// VirtualSigstore's own hour would end long scenarios.
		tl.ValidityPeriodStart = time.Now().Add(-time.Hour)
		tl.ValidityPeriodEnd = time.Now().Add(24 * time.Hour)
	}
	return root.NewTrustedRoot(root.TrustedRootMediaType01, append(l.vs.FulcioCertificateAuthorities(), cas...), nil, nil, logs)
}

// TrustedRootJSON is TrustedRoot as a trusted_root.json.
func (l *Log) TrustedRootJSON(cas ...root.CertificateAuthority) ([]byte, error) {
	tr, err := l.TrustedRoot(cas...)
	if err != nil {
		return nil, err
	}
	return json.Marshal(tr)
}

// SigningConfigJSON is a signing config sending cosign's entries to this
// log (and naming no Fulcio, OIDC provider or timestamp authority).
func (l *Log) SigningConfigJSON() ([]byte, error) {
	return signingConfig([]root.Service{{URL: l.URL, MajorAPIVersion: 1, ValidityPeriodStart: time.Now().Add(-time.Hour)}})
}

// NoLogSigningConfigJSON is a signing config naming no transparency log:
// cosign signs without a log entry (what --tlog-upload=false did).
func NoLogSigningConfigJSON() ([]byte, error) { return signingConfig(nil) }

func signingConfig(rekor []root.Service) ([]byte, error) {
	sc, err := root.NewSigningConfig(root.SigningConfigMediaType02, nil, nil, rekor,
		root.ServiceConfiguration{Selector: prototrustroot.ServiceSelector_ANY}, nil,
		root.ServiceConfiguration{Selector: prototrustroot.ServiceSelector_ANY})
	if err != nil {
		return nil, fmt.Errorf("signing config: %w", err)
	}
	return json.Marshal(sc)
}
