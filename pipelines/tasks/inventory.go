package tasks

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/fluxcd/cli-utils/pkg/kstatus/polling"
	"github.com/fluxcd/cli-utils/pkg/object"
	"github.com/fluxcd/pkg/ssa"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flotilla-cd/flotilla/pkg/fault"
)

// Values of the apply-manifests task's param prune: what becomes of the
// objects an earlier commit applied to the cluster and this one no longer
// renders (the stale objects, told by the inventory).
const (
	// PruneOff deletes nothing; the inventory forgets the stale objects.
	PruneOff = "false"
	// PruneAfter deletes nothing yet: the stale objects wait in the
	// inventory (pending) until the cluster succeeded, then a run of
	// PrunePending deletes them. A rollout's apply.
	PruneAfter = "true"
	// PruneNow deletes the stale objects at once, after the apply: a
	// revert, which has no analysis to wait for.
	PruneNow = "now"
	// PrunePending applies nothing: it deletes the objects the inventory
	// holds pending, when the inventory is still the commit's (a newer
	// apply or a revert took them over otherwise). Run once the cluster
	// succeeded.
	PrunePending = "pending"
)

// Labels and annotations of the objects apply-manifests applies.
const (
	// LabelApplication marks each object applied for a git application:
	// only objects carrying it (with the application's name) are pruned,
	// as Flux prunes only what carries its kustomization's labels.
	LabelApplication = "flotilla.dev/application"
	// AnnotationPrune "disabled" on an object in the cluster keeps it from
	// being pruned (Flux's kustomize.toolkit.fluxcd.io/prune: disabled).
	AnnotationPrune = "flotilla.dev/prune"
)

// InventoryName names the ConfigMap, in the application's namespace, that
// records what a git application's commits applied to a cluster.
func InventoryName(application string) string { return "flotilla-inventory-" + application }

// Inventory is what a git application's last apply left in a cluster: the
// ConfigMap InventoryName(application), keys revision, entries and pending
// (JSON lists in the format of the inventory Flux's kustomize-controller
// keeps in a Kustomization's status: {"id": "<namespace>_<name>_<group>_
// <kind>", "v": "<version>"}).
type Inventory struct {
	// Revision is the repository@commit last applied.
	Revision string
	// Entries are the objects that commit renders, sorted by id.
	Entries []InventoryEntry
	// Pending are objects an earlier commit applied that this one no
	// longer renders, still in the cluster until it succeeded (PruneAfter).
	Pending []InventoryEntry
}

// InventoryEntry names one object as Flux's ResourceRef does.
type InventoryEntry struct {
	// ID is the object's cli-utils ObjMetadata: namespace_name_group_kind.
	ID string `json:"id"`
	// Version is its API version (without the group).
	Version string `json:"v"`
}

// Inventory keys of the ConfigMap.
const (
	inventoryRevision = "revision"
	inventoryEntries  = "entries"
	inventoryPending  = "pending"
)

// ReadInventory reads application's inventory in namespace; a cluster the
// application was never applied to (by a flotilla that records one) has
// an empty one.
func ReadInventory(ctx context.Context, kube kubernetes.Interface, namespace, application string) (Inventory, error) {
	var inv Inventory
	cm, err := kube.CoreV1().ConfigMaps(namespace).Get(ctx, InventoryName(application), metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return inv, nil
	case err != nil:
		return inv, fmt.Errorf("reading the inventory %s/%s: %w", namespace, InventoryName(application), err)
	}
	inv.Revision = cm.Data[inventoryRevision]
	for key, into := range map[string]*[]InventoryEntry{inventoryEntries: &inv.Entries, inventoryPending: &inv.Pending} {
		if s := cm.Data[key]; s != "" {
			if err := json.Unmarshal([]byte(s), into); err != nil {
				return inv, fault.Permanent(fmt.Errorf("reading the inventory %s/%s, key %s: %w", namespace, InventoryName(application), key, err))
			}
		}
	}
	return inv, nil
}

// writeInventory server-side applies inv as application's inventory.
func writeInventory(ctx context.Context, kube kubernetes.Interface, namespace, application string, inv Inventory) error {
	data := map[string]string{inventoryRevision: inv.Revision}
	for key, es := range map[string][]InventoryEntry{inventoryEntries: inv.Entries, inventoryPending: inv.Pending} {
		if es == nil {
			es = []InventoryEntry{}
		}
		b, err := json.Marshal(es)
		if err != nil {
			return fmt.Errorf("encoding the inventory: %w", err)
		}
		data[key] = string(b)
	}
	cm := &corev1.ConfigMap{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{
			Name: InventoryName(application), Namespace: namespace,
			Labels: map[string]string{LabelApplication: application, "app.kubernetes.io/managed-by": "flotilla"},
		},
		Data: data,
	}
	body, err := json.Marshal(cm)
	if err != nil {
		return fmt.Errorf("encoding the inventory: %w", err)
	}
	force := true
	if _, err := kube.CoreV1().ConfigMaps(namespace).Patch(ctx, cm.Name, types.ApplyPatchType, body,
		metav1.PatchOptions{FieldManager: FieldManager, Force: &force}); err != nil {
		return fmt.Errorf("writing the inventory %s/%s: %w", namespace, cm.Name, err)
	}
	return nil
}

// entriesOf names objs as inventory entries, sorted by id, without
// duplicates.
func entriesOf(objs []*unstructured.Unstructured) []InventoryEntry {
	out := make([]InventoryEntry, 0, len(objs))
	for _, o := range objs {
		out = append(out, InventoryEntry{ID: object.UnstructuredToObjMetadata(o).String(), Version: o.GroupVersionKind().Version})
	}
	return sortEntries(out)
}

func sortEntries(es []InventoryEntry) []InventoryEntry {
	slices.SortFunc(es, func(a, b InventoryEntry) int {
		if a.ID < b.ID {
			return -1
		}
		if a.ID > b.ID {
			return 1
		}
		return 0
	})
	return slices.CompactFunc(es, func(a, b InventoryEntry) bool { return a.ID == b.ID })
}

// stale returns the entries of old not in kept (by id), sorted.
func stale(old []InventoryEntry, kept []InventoryEntry) []InventoryEntry {
	in := make(map[string]bool, len(kept))
	for _, e := range kept {
		in[e.ID] = true
	}
	var out []InventoryEntry
	for _, e := range old {
		if !in[e.ID] {
			out = append(out, e)
		}
	}
	return sortEntries(out)
}

// objectsOf turns entries back into objects to delete.
func objectsOf(es []InventoryEntry) ([]*unstructured.Unstructured, error) {
	out := make([]*unstructured.Unstructured, 0, len(es))
	for _, e := range es {
		m, err := object.ParseObjMetadata(e.ID)
		if err != nil {
			return nil, fault.Permanent(fmt.Errorf("inventory entry %q: %w", e.ID, err))
		}
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(schema.GroupVersionKind{Group: m.GroupKind.Group, Version: e.Version, Kind: m.GroupKind.Kind})
		u.SetName(m.Name)
		u.SetNamespace(m.Namespace)
		out = append(out, u)
	}
	return out, nil
}

// resourceManager is Flux's server-side apply manager for a cluster, as
// field manager FieldManager.
func resourceManager(cfg *rest.Config) (*ssa.ResourceManager, client.Client, error) {
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return nil, nil, fmt.Errorf("creating kubernetes client: %w", err)
	}
	poller := polling.NewStatusPoller(c, c.RESTMapper(), polling.Options{})
	return ssa.NewResourceManager(c, poller, ssa.Owner{Field: FieldManager, Group: "flotilla.dev"}), c, nil
}

// prune deletes the objects of es that still carry application's label
// and no AnnotationPrune "disabled", workloads first and CRDs and
// Namespaces last (ssa's reverse apply order). It returns what it deleted.
func prune(ctx context.Context, rm *ssa.ResourceManager, application string, es []InventoryEntry) ([]string, error) {
	if len(es) == 0 {
		return nil, nil
	}
	objs, err := objectsOf(es)
	if err != nil {
		return nil, err
	}
	opts := ssa.DefaultDeleteOptions()
	opts.Inclusions = map[string]string{LabelApplication: application}
	opts.Exclusions = map[string]string{AnnotationPrune: "disabled"}
	cs, err := rm.DeleteAll(ctx, objs, opts)
	var deleted []string
	if cs != nil {
		for _, e := range cs.Entries {
			if e.Action == ssa.DeletedAction {
				deleted = append(deleted, e.Subject)
			}
		}
	}
	if err != nil {
		return deleted, fmt.Errorf("pruning: %w", err)
	}
	return deleted, nil
}
