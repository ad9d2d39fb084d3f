package kubelease

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"github.com/leaderrun/leaderrun/lease/internal/storeerr"
)

// Pod labels (--pod-label KEY=VALUE): the holder puts the label on its own
// Pod and takes it off when it stops leading, so that a Service selecting
// the label sends traffic to the leader's Pod only. The label is a routing
// hint, never part of the lease's safety: a label left by a holder that
// died with its node is taken off by the next holder, and a label may
// outlive a holder that lost the API server until the server answers
// again (docs/listen.md). The Pod is this process's: POD_NAME (the
// downward API) or HOSTNAME, in POD_NAMESPACE, the service account's
// namespace, or the store's.

// podRef returns the namespace and name of the Pod this process runs in.
func (s *Store) podRef() (ns, name string, err error) {
	name = s.getenv("POD_NAME")
	if name == "" {
		name = s.getenv("HOSTNAME")
	}
	if name == "" {
		return "", "", storeerr.Config("--pod-label: no Pod name: set POD_NAME from the downward API (fieldRef metadata.name), or run in a Pod (HOSTNAME)")
	}
	ns = s.getenv("POD_NAMESPACE")
	if ns == "" {
		if b, err := os.ReadFile(filepath.Join(saDir, "namespace")); err == nil {
			ns = strings.TrimSpace(string(b))
		}
	}
	if ns == "" {
		ns = s.cfg.namespace
	}
	return ns, name, nil
}

// podPath is the API path of Pod name in ns.
func podPath(ns, name string) string {
	return "/api/v1/namespaces/" + ns + "/pods/" + name
}

// CheckPod reports, before any lease is taken, whether this process's Pod
// can be read: the Pod named by POD_NAME or HOSTNAME exists, and RBAC lets
// this user get pods (a refusal is lease.ErrConfig, one line).
func (s *Store) CheckPod(ctx context.Context) error {
	ns, name, err := s.podRef()
	if err != nil {
		return err
	}
	cctx, cancel := s.callCtx(ctx)
	defer cancel()
	err = s.leases.rc.Get().AbsPath(podPath(ns, name)).Do(cctx).Error()
	if apierrors.IsNotFound(err) {
		return storeerr.Config("--pod-label: no Pod %s in namespace %s (set POD_NAME and POD_NAMESPACE from the downward API)", name, ns)
	}
	return s.classify("get", "pod "+name, err)
}

// LabelPod puts key=value on this process's Pod, after taking it off every
// other Pod of the namespace that has it (a previous holder's, left when it
// died): a Service selecting it then reaches this Pod only.
func (s *Store) LabelPod(ctx context.Context, key, value string) error {
	ns, name, err := s.podRef()
	if err != nil {
		return err
	}
	cctx, cancel := s.callCtx(ctx)
	defer cancel()
	raw, err := s.leases.rc.Get().AbsPath("/api/v1/namespaces/"+ns+"/pods").Param("labelSelector", key+"="+value).DoRaw(cctx)
	if err != nil {
		return s.classify("list", "pods labelled "+key+"="+value, err)
	}
	var list struct {
		Items []struct {
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		} `json:"items"`
	}
	if err := json.Unmarshal(raw, &list); err != nil {
		return s.classify("list", "pods labelled "+key+"="+value, err)
	}
	for _, p := range list.Items {
		if p.Metadata.Name != name {
			if err := s.unlabel(ctx, ns, p.Metadata.Name, key, value); err != nil {
				return err
			}
		}
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]string{key: value}}})
	cctx, cancel = s.callCtx(ctx)
	defer cancel()
	err = s.leases.rc.Patch(types.MergePatchType).AbsPath(podPath(ns, name)).Body(patch).Do(cctx).Error()
	return s.classify("patch", "pod "+name, err)
}

// UnlabelPod takes key off this process's Pod, if its value is value.
func (s *Store) UnlabelPod(ctx context.Context, key, value string) error {
	ns, name, err := s.podRef()
	if err != nil {
		return err
	}
	return s.unlabel(ctx, ns, name, key, value)
}

// unlabel takes key off Pod name when its value is still value (a JSON
// patch whose test fails changes nothing: the label was taken off, or
// changed, by someone else).
func (s *Store) unlabel(ctx context.Context, ns, name, key, value string) error {
	ptr := "/metadata/labels/" + strings.NewReplacer("~", "~0", "/", "~1").Replace(key)
	patch, _ := json.Marshal([]map[string]any{{"op": "test", "path": ptr, "value": value}, {"op": "remove", "path": ptr}})
	cctx, cancel := s.callCtx(ctx)
	defer cancel()
	err := s.leases.rc.Patch(types.JSONPatchType).AbsPath(podPath(ns, name)).Body(patch).Do(cctx).Error()
	var se apierrors.APIStatus
	if err != nil && (apierrors.IsNotFound(err) || apierrors.IsInvalid(err) || errors.As(err, &se) && se.Status().Code == http.StatusUnprocessableEntity) {
		return nil // gone, or the label is not (or no longer) value
	}
	if err != nil {
		return s.classify("patch", fmt.Sprintf("pod %s (take %s off)", name, key), err)
	}
	return nil
}
