package deploy

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/nvstripe/nvstripe/config"
)

// manifestDir holds the Kubernetes manifests and their examples.
const manifestDir = "kubernetes"

// driverName is the CSI driver's name (package csi's DriverName).
const driverName = "nvstripe.io"

// kinds are the API types the manifests may use, by apiVersion and kind.
var kinds = map[string]func() metav1.Object{
	"v1/Namespace":             func() metav1.Object { return &corev1.Namespace{} },
	"v1/ConfigMap":             func() metav1.Object { return &corev1.ConfigMap{} },
	"v1/Secret":                func() metav1.Object { return &corev1.Secret{} },
	"v1/ServiceAccount":        func() metav1.Object { return &corev1.ServiceAccount{} },
	"v1/PersistentVolume":      func() metav1.Object { return &corev1.PersistentVolume{} },
	"v1/PersistentVolumeClaim": func() metav1.Object { return &corev1.PersistentVolumeClaim{} },
	"v1/Pod":                   func() metav1.Object { return &corev1.Pod{} },
	"apps/v1/Deployment":       func() metav1.Object { return &appsv1.Deployment{} },
	"apps/v1/DaemonSet":        func() metav1.Object { return &appsv1.DaemonSet{} },
	"batch/v1/Job":             func() metav1.Object { return &batchv1.Job{} },
	"rbac.authorization.k8s.io/v1/ClusterRole":        func() metav1.Object { return &rbacv1.ClusterRole{} },
	"rbac.authorization.k8s.io/v1/ClusterRoleBinding": func() metav1.Object { return &rbacv1.ClusterRoleBinding{} },
	"rbac.authorization.k8s.io/v1/Role":               func() metav1.Object { return &rbacv1.Role{} },
	"rbac.authorization.k8s.io/v1/RoleBinding":        func() metav1.Object { return &rbacv1.RoleBinding{} },
	"storage.k8s.io/v1/CSIDriver":                     func() metav1.Object { return &storagev1.CSIDriver{} },
	"storage.k8s.io/v1/StorageClass":                  func() metav1.Object { return &storagev1.StorageClass{} },
	"storage.k8s.io/v1/VolumeAttributesClass":         func() metav1.Object { return &storagev1.VolumeAttributesClass{} },
}

// clusterScoped are the kinds without a namespace.
var clusterScoped = []string{"Namespace", "PersistentVolume", "ClusterRole", "ClusterRoleBinding", "CSIDriver", "StorageClass", "VolumeAttributesClass"}

// manifest is one decoded YAML document.
type manifest struct {
	where string // file and document index
	kind  string
	obj   metav1.Object
}

// decodeDocs splits a YAML stream into documents and decodes each strictly
// into its API type: an unknown kind, an unknown or misspelt field, or a
// value of the wrong type is an error. Documents holding only comments are
// skipped.
func decodeDocs(file string, b []byte) ([]manifest, error) {
	var out []manifest
	for i, doc := range regexp.MustCompile(`(?m)^---[ \t]*$`).Split(string(b), -1) {
		if onlyComments(doc) {
			continue
		}
		where := fmt.Sprintf("%s#%d", file, i)
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &tm); err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		newObj := kinds[tm.APIVersion+"/"+tm.Kind]
		if newObj == nil {
			return nil, fmt.Errorf("%s: apiVersion %q kind %q is not one the test knows", where, tm.APIVersion, tm.Kind)
		}
		obj := newObj()
		if err := yaml.UnmarshalStrict([]byte(doc), obj); err != nil {
			return nil, fmt.Errorf("%s (%s): %w", where, tm.Kind, err)
		}
		out = append(out, manifest{where: where, kind: tm.Kind, obj: obj})
	}
	return out, nil
}

func onlyComments(doc string) bool {
	for line := range strings.Lines(doc) {
		if l := strings.TrimSpace(line); l != "" && !strings.HasPrefix(l, "#") {
			return false
		}
	}
	return true
}

// loadManifests decodes every .yaml file under manifestDir.
func loadManifests(t *testing.T) []manifest {
	t.Helper()
	var all []manifest
	err := filepath.WalkDir(manifestDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".yaml") {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		ms, err := decodeDocs(p, b)
		if err != nil {
			t.Error(err)
		}
		all = append(all, ms...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) == 0 {
		t.Fatalf("no manifests under %s", manifestDir)
	}
	return all
}

// index finds manifests by kind, namespace and name.
type index map[string]manifest

func key(kind, ns, name string) string { return kind + "/" + ns + "/" + name }

func newIndex(t *testing.T, ms []manifest) index {
	t.Helper()
	ix := index{}
	for _, m := range ms {
		ns := m.obj.GetNamespace()
		if scoped := !slices.Contains(clusterScoped, m.kind); scoped && ns == "" {
			t.Errorf("%s: %s %s has no namespace", m.where, m.kind, m.obj.GetName())
		} else if !scoped && ns != "" {
			t.Errorf("%s: %s %s is cluster-scoped but names namespace %s", m.where, m.kind, m.obj.GetName(), ns)
		}
		k := key(m.kind, ns, m.obj.GetName())
		if prev, ok := ix[k]; ok {
			t.Errorf("%s: %s defined again (first in %s)", m.where, k, prev.where)
		}
		ix[k] = m
	}
	return ix
}

func (ix index) has(kind, ns, name string) bool {
	_, ok := ix[key(kind, ns, name)]
	return ok
}

// of returns the objects of one kind.
func of[T any](ms []manifest) []T {
	var out []T
	for _, m := range ms {
		if o, ok := m.obj.(T); ok {
			out = append(out, o)
		}
	}
	return out
}

// podSpec is the pod template of a workload, with where it is.
type podSpec struct {
	where, ns string
	spec      *corev1.PodSpec
}

func podSpecs(ms []manifest) []podSpec {
	var out []podSpec
	for _, m := range ms {
		where, ns := m.kind+" "+m.obj.GetName(), m.obj.GetNamespace()
		switch o := m.obj.(type) {
		case *corev1.Pod:
			out = append(out, podSpec{where, ns, &o.Spec})
		case *appsv1.Deployment:
			out = append(out, podSpec{where, ns, &o.Spec.Template.Spec})
		case *appsv1.DaemonSet:
			out = append(out, podSpec{where, ns, &o.Spec.Template.Spec})
		case *batchv1.Job:
			out = append(out, podSpec{where, ns, &o.Spec.Template.Spec})
		}
	}
	return out
}

// TestManifestsDecodeStrictly: every document under deploy/kubernetes
// decodes into its Kubernetes API type with unknown fields refused, and the
// set holds the pieces of a CSI deployment.
func TestManifestsDecodeStrictly(t *testing.T) {
	ms := loadManifests(t)
	counts := map[string]int{}
	for _, m := range ms {
		counts[m.kind]++
	}
	for kind, want := range map[string]int{"CSIDriver": 1, "Deployment": 1, "DaemonSet": 2, "StorageClass": 2, "ServiceAccount": 1,
		"ClusterRole": 1, "PersistentVolumeClaim": 2, "Pod": 2, "ConfigMap": 1} {
		if counts[kind] < want {
			t.Errorf("%d %s, want at least %d", counts[kind], kind, want)
		}
	}
	// The decoder itself refuses what the API server would.
	for _, bad := range []string{
		"apiVersion: storage.k8s.io/v1\nkind: CSIDriver\nmetadata: {name: x}\nspec: {attachRequired: false, attachRequird: true}\n",
		"apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec: {containers: [{name: c, image: i, mountPropagation: Bidirectional}]}\n",
		"apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: x}\nspec: {replicas: 2}\n",
		"apiVersion: storage.k8s.io/v1beta7\nkind: StorageClass\nmetadata: {name: x}\n",
	} {
		if _, err := decodeDocs("bad", []byte(bad)); err == nil {
			t.Errorf("decoded without error:\n%s", bad)
		}
	}
}

// TestManifestsCrossReferences: what one manifest names, another defines:
// service accounts, claims, classes, config maps and secrets, roles; the
// StorageClasses and PersistentVolumes name the CSIDriver; the CSI socket
// paths agree between the driver and its sidecars, and the registrar tells
// kubelet the host path of the driver's socket; the node plugin finds the
// agent's socket and FUSE directory on the host where the agent puts them;
// a Bidirectional mount is in a privileged container.
func TestManifestsCrossReferences(t *testing.T) {
	ms := loadManifests(t)
	ix := newIndex(t, ms)
	drivers := of[*storagev1.CSIDriver](ms)
	if len(drivers) != 1 || drivers[0].Name != driverName {
		t.Fatalf("CSIDrivers %v, want one named %s", drivers, driverName)
	}
	for _, sc := range of[*storagev1.StorageClass](ms) {
		if sc.Provisioner != driverName {
			t.Errorf("StorageClass %s: provisioner %q, want %q", sc.Name, sc.Provisioner, driverName)
		}
		checkParameters(t, sc)
	}
	for _, vac := range of[*storagev1.VolumeAttributesClass](ms) {
		if vac.DriverName != driverName {
			t.Errorf("VolumeAttributesClass %s: driver %q, want %q", vac.Name, vac.DriverName, driverName)
		}
		for k, v := range vac.Parameters {
			if !qosParameter(k) || v == "" {
				t.Errorf("VolumeAttributesClass %s: parameter %s=%q cannot change on a volume (only qos* ones can)", vac.Name, k, v)
			}
		}
	}
	for _, pv := range of[*corev1.PersistentVolume](ms) {
		if pv.Spec.CSI == nil || pv.Spec.CSI.Driver != driverName {
			t.Errorf("PersistentVolume %s: not a volume of %s", pv.Name, driverName)
		}
	}
	for _, pvc := range of[*corev1.PersistentVolumeClaim](ms) {
		if c := pvc.Spec.StorageClassName; c != nil && *c != "" && !ix.has("StorageClass", "", *c) {
			t.Errorf("PersistentVolumeClaim %s: no StorageClass %s", pvc.Name, *c)
		}
		if v := pvc.Spec.VolumeName; v != "" {
			pv, ok := ix[key("PersistentVolume", "", v)]
			if !ok {
				t.Errorf("PersistentVolumeClaim %s: no PersistentVolume %s", pvc.Name, v)
				continue
			}
			for _, mode := range pvc.Spec.AccessModes {
				if !slices.Contains(pv.obj.(*corev1.PersistentVolume).Spec.AccessModes, mode) {
					t.Errorf("PersistentVolumeClaim %s asks for %s, which PersistentVolume %s lacks", pvc.Name, mode, v)
				}
			}
		}
	}
	for _, ps := range podSpecs(ms) {
		checkPodRefs(t, ix, ps)
	}
	checkBindings(t, ix, ms)
	checkSockets(t, ms)
}

// checkParameters checks a StorageClass's parameters against the names the
// driver takes.
func checkParameters(t *testing.T, sc *storagev1.StorageClass) {
	t.Helper()
	for k, v := range sc.Parameters {
		var ok bool
		switch k {
		case "k", "m":
			n, err := strconv.Atoi(v)
			ok = err == nil && n >= 1
		case "checksums", "writeLog":
			ok = v == "true" || v == "false"
		case "failureDomain":
			ok = true
		case "csi.storage.k8s.io/fstype":
			ok = v == "ext4" || v == "xfs"
		default:
			ok = qosParameter(k) && v != ""
		}
		if !ok {
			t.Errorf("StorageClass %s: parameter %s=%q is not one the driver takes", sc.Name, k, v)
		}
	}
}

// qosParameter says whether k is one of the driver's QoS parameters (the
// csi package's tests check their values).
func qosParameter(k string) bool {
	return slices.Contains([]string{"qosIOPS", "qosReadIOPS", "qosWriteIOPS", "qosBPS", "qosReadBPS", "qosWriteBPS", "qosBurst"}, k)
}

// checkPodRefs checks what a pod template names: its service account,
// claims, config maps and secrets (unless optional), volume mounts; and
// that Bidirectional propagation is only asked by privileged containers.
func checkPodRefs(t *testing.T, ix index, ps podSpec) {
	t.Helper()
	if sa := ps.spec.ServiceAccountName; sa != "" && !ix.has("ServiceAccount", ps.ns, sa) {
		t.Errorf("%s: no ServiceAccount %s/%s", ps.where, ps.ns, sa)
	}
	vols := map[string]bool{}
	for _, v := range ps.spec.Volumes {
		vols[v.Name] = true
		switch {
		case v.PersistentVolumeClaim != nil && !ix.has("PersistentVolumeClaim", ps.ns, v.PersistentVolumeClaim.ClaimName):
			t.Errorf("%s: no PersistentVolumeClaim %s/%s", ps.where, ps.ns, v.PersistentVolumeClaim.ClaimName)
		case v.ConfigMap != nil && !ptrTrue(v.ConfigMap.Optional) && !ix.has("ConfigMap", ps.ns, v.ConfigMap.Name):
			t.Errorf("%s: no ConfigMap %s/%s", ps.where, ps.ns, v.ConfigMap.Name)
		case v.Secret != nil && !ptrTrue(v.Secret.Optional) && !ix.has("Secret", ps.ns, v.Secret.SecretName):
			t.Errorf("%s: no Secret %s/%s", ps.where, ps.ns, v.Secret.SecretName)
		}
	}
	for _, c := range ps.spec.Containers {
		for _, m := range c.VolumeMounts {
			if !vols[m.Name] {
				t.Errorf("%s container %s mounts volume %s, which the pod lacks", ps.where, c.Name, m.Name)
			}
			if m.MountPropagation != nil && *m.MountPropagation == corev1.MountPropagationBidirectional &&
				(c.SecurityContext == nil || !ptrTrue(c.SecurityContext.Privileged)) {
				t.Errorf("%s container %s: Bidirectional mount %s in an unprivileged container (the API refuses it)", ps.where, c.Name, m.MountPath)
			}
		}
		for _, d := range c.VolumeDevices {
			if !vols[d.Name] {
				t.Errorf("%s container %s uses volume %s, which the pod lacks", ps.where, c.Name, d.Name)
			}
		}
		for _, e := range c.Env {
			if r := e.ValueFrom; r != nil && r.SecretKeyRef != nil && !ptrTrue(r.SecretKeyRef.Optional) && !ix.has("Secret", ps.ns, r.SecretKeyRef.Name) {
				t.Errorf("%s container %s: env %s from missing Secret %s", ps.where, c.Name, e.Name, r.SecretKeyRef.Name)
			}
		}
	}
}

func ptrTrue(b *bool) bool { return b != nil && *b }

// checkBindings checks that bindings name existing roles and service
// accounts, and that each sidecar's service account may do what the
// sidecar does.
func checkBindings(t *testing.T, ix index, ms []manifest) {
	t.Helper()
	var bindings []binding
	for _, b := range of[*rbacv1.ClusterRoleBinding](ms) {
		bindings = append(bindings, binding{b.Name, "", b.RoleRef, b.Subjects})
	}
	for _, b := range of[*rbacv1.RoleBinding](ms) {
		bindings = append(bindings, binding{b.Name, b.Namespace, b.RoleRef, b.Subjects})
	}
	for _, b := range bindings {
		roleNS := b.ns
		if b.ref.Kind == "ClusterRole" {
			roleNS = ""
		}
		if !ix.has(b.ref.Kind, roleNS, b.ref.Name) {
			t.Errorf("binding %s: no %s %s", b.name, b.ref.Kind, b.ref.Name)
		}
		for _, s := range b.subjects {
			if s.Kind == "ServiceAccount" && !ix.has("ServiceAccount", s.Namespace, s.Name) {
				t.Errorf("binding %s: no ServiceAccount %s/%s", b.name, s.Namespace, s.Name)
			}
		}
	}
	for _, ps := range podSpecs(ms) {
		for _, c := range ps.spec.Containers {
			for _, need := range sidecarNeeds[sidecar(c.Image)] {
				if !allowed(ix, bindings, ps.ns, ps.spec.ServiceAccountName, need) {
					t.Errorf("%s: sidecar %s needs %v, which ServiceAccount %s may not", ps.where, c.Name, need, ps.spec.ServiceAccountName)
				}
			}
		}
	}
}

type binding struct {
	name, ns string
	ref      rbacv1.RoleRef
	subjects []rbacv1.Subject
}

// access is one verb on one resource of an API group; namespaced is set
// for a namespaced grant (a Role suffices).
type access struct {
	group, resource, verb string
	namespaced            bool
}

// sidecarNeeds is what each sidecar does with the API (the RBAC files of
// kubernetes-csi's external-provisioner and external-resizer).
var sidecarNeeds = map[string][]access{
	"csi-provisioner": {
		{"", "persistentvolumes", "create", false}, {"", "persistentvolumes", "delete", false},
		{"", "persistentvolumeclaims", "update", false}, {"", "persistentvolumeclaims", "watch", false},
		{"storage.k8s.io", "storageclasses", "get", false}, {"storage.k8s.io", "csinodes", "get", false},
		{"", "nodes", "get", false}, {"", "events", "create", false},
		{"coordination.k8s.io", "leases", "update", true},
	},
	"csi-resizer": {
		{"", "persistentvolumes", "patch", false}, {"", "persistentvolumeclaims", "watch", false},
		{"", "persistentvolumeclaims/status", "patch", false}, {"", "pods", "list", false}, {"", "events", "create", false},
		{"coordination.k8s.io", "leases", "update", true},
	},
}

// sidecar names a kubernetes-csi sidecar image, "" for any other.
func sidecar(image string) string {
	name, _, _ := strings.Cut(path.Base(image), ":")
	if strings.Contains(image, "sig-storage/") {
		return name
	}
	return ""
}

// allowed says whether service account sa in ns may do a through the
// bindings.
func allowed(ix index, bindings []binding, ns, sa string, a access) bool {
	for _, b := range bindings {
		if b.ns != "" && (!a.namespaced || b.ns != ns) {
			continue
		}
		if !slices.ContainsFunc(b.subjects, func(s rbacv1.Subject) bool {
			return s.Kind == "ServiceAccount" && s.Namespace == ns && s.Name == sa
		}) {
			continue
		}
		var rules []rbacv1.PolicyRule
		if b.ref.Kind == "ClusterRole" {
			if r, ok := ix[key("ClusterRole", "", b.ref.Name)]; ok {
				rules = r.obj.(*rbacv1.ClusterRole).Rules
			}
		} else if r, ok := ix[key("Role", b.ns, b.ref.Name)]; ok {
			rules = r.obj.(*rbacv1.Role).Rules
		}
		for _, r := range rules {
			if slices.Contains(r.APIGroups, a.group) && slices.Contains(r.Resources, a.resource) && slices.Contains(r.Verbs, a.verb) {
				return true
			}
		}
	}
	return false
}

// flag returns the value of --name=V or --name V in args, "" when absent.
func flag(args []string, name string) string {
	for i, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v
		}
		if a == "--"+name && i+1 < len(args) {
			return args[i+1]
		}
	}
	return ""
}

// hostPathOf maps a path inside container c to the host path of the
// hostPath volume mounted over it, "" when none is.
func hostPathOf(ps podSpec, c corev1.Container, p string) (volume, host string) {
	best := ""
	for _, m := range c.VolumeMounts {
		if (p == m.MountPath || strings.HasPrefix(p, m.MountPath+"/")) && len(m.MountPath) > len(best) {
			best, volume = m.MountPath, m.Name
		}
	}
	if best == "" {
		return "", ""
	}
	for _, v := range ps.spec.Volumes {
		if v.Name == volume && v.HostPath != nil {
			return volume, path.Join(v.HostPath.Path, strings.TrimPrefix(p, best))
		}
	}
	return volume, ""
}

// checkSockets follows the unix sockets between containers: the driver's
// --endpoint and each sidecar's --csi-address are the same file of the same
// volume; the registrar's --kubelet-registration-path is that file's host
// path, under kubelet's plugins directory for the driver; the node plugin's
// --agent and --state-dir are, on the host, the agent DaemonSet's --socket
// and a directory under its propagated state mount.
func checkSockets(t *testing.T, ms []manifest) {
	t.Helper()
	var agentSocket, agentStateHost string
	for _, ps := range podSpecs(ms) {
		for _, c := range ps.spec.Containers {
			if len(c.Args) > 0 && c.Args[0] == "agent" {
				_, agentSocket = hostPathOf(ps, c, flag(c.Args, "socket"))
				state := path.Dir(flag(c.Args, "state-dir"))
				_, agentStateHost = hostPathOf(ps, c, state)
				if !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool {
					return m.MountPath == state && m.MountPropagation != nil && *m.MountPropagation == corev1.MountPropagationBidirectional
				}) {
					t.Errorf("%s: the agent's %s is not mounted Bidirectional: its FUSE mounts would not reach the host", ps.where, state)
				}
			}
		}
	}
	if agentSocket == "" {
		t.Fatal("no agent container with --socket on a hostPath volume")
	}
	nodes := 0
	for _, ps := range podSpecs(ms) {
		for _, c := range ps.spec.Containers {
			if len(c.Args) == 0 || c.Args[0] != "csi" {
				continue
			}
			sock, ok := strings.CutPrefix(flag(c.Args, "endpoint"), "unix://")
			if !ok {
				t.Errorf("%s: --endpoint %q is not unix://PATH", ps.where, flag(c.Args, "endpoint"))
				continue
			}
			vol, host := hostPathOf(ps, c, sock)
			checkSidecars(t, ps, vol, path.Base(sock), host)
			if flag(c.Args, "mode") != "node" {
				continue
			}
			nodes++
			if _, a := hostPathOf(ps, c, flag(c.Args, "agent")); a != agentSocket {
				t.Errorf("%s: --agent is %q on the host, the agent listens on %q", ps.where, a, agentSocket)
			}
			if _, s := hostPathOf(ps, c, flag(c.Args, "state-dir")); s == "" || !strings.HasPrefix(s, agentStateHost+"/") {
				t.Errorf("%s: --state-dir is %q on the host, not under the agent's state mount %q", ps.where, s, agentStateHost)
			}
		}
	}
	if nodes != 1 {
		t.Errorf("%d node plugins (csi --mode node), want 1", nodes)
	}
}

// checkSidecars checks the sidecars of the driver whose socket is file sock
// in volume vol (host path host for a hostPath volume).
func checkSidecars(t *testing.T, ps podSpec, vol, sock, host string) {
	t.Helper()
	n := 0
	for _, c := range ps.spec.Containers {
		if sidecar(c.Image) == "" {
			continue
		}
		n++
		addr := flag(c.Args, "csi-address")
		v, _ := hostPathOf(ps, c, addr)
		if v != vol || path.Base(addr) != sock {
			t.Errorf("%s: sidecar %s --csi-address %s is not the driver's socket %s in volume %s", ps.where, c.Name, addr, sock, vol)
		}
		if sidecar(c.Image) == "csi-node-driver-registrar" {
			reg := flag(c.Args, "kubelet-registration-path")
			if reg != host || reg != "/var/lib/kubelet/plugins/"+driverName+"/"+sock {
				t.Errorf("%s: --kubelet-registration-path %q, the driver's socket is %q on the host", ps.where, reg, host)
			}
		}
	}
	if n == 0 {
		t.Errorf("%s: the driver has no sidecars", ps.where)
	}
}

// TestManifestsConfig: the nvstripe.yaml of the ConfigMap parses strictly,
// as every nvstripe container reads it.
func TestManifestsConfig(t *testing.T) {
	n := 0
	for _, cm := range of[*corev1.ConfigMap](loadManifests(t)) {
		for name, text := range cm.Data {
			if !strings.HasSuffix(name, ".yaml") {
				continue
			}
			n++
			p := filepath.Join(t.TempDir(), name)
			if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := config.ReadFile(p, true); err != nil {
				t.Errorf("ConfigMap %s key %s: %v", cm.Name, name, err)
			}
		}
	}
	if n == 0 {
		t.Error("no ConfigMap holds an nvstripe.yaml")
	}
}

// TestManifestsCommands: every nvstripe container's command line is one
// the binary takes (its arguments with --help exit 0; an unknown flag
// exits 2). A command this binary lacks skips with a message.
func TestManifestsCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the nvstripe binary")
	}
	ms := loadManifests(t)
	bin := binary(t)
	envRef := regexp.MustCompile(`\$\(([A-Z_]+)\)`)
	for _, ps := range podSpecs(ms) {
		for _, c := range ps.spec.Containers {
			if !slices.Equal(c.Command, []string{"/usr/local/bin/nvstripe"}) {
				continue
			}
			t.Run(strings.ReplaceAll(ps.where, " ", "_")+"/"+c.Name, func(t *testing.T) {
				var args []string
				for _, a := range c.Args {
					args = append(args, envRef.ReplaceAllString(a, "node-1"))
				}
				if !hasCommand(t, bin, args[0]) {
					t.Fatalf("the manifest runs nvstripe %s, which this binary does not have", args[0])
				}
				out, err := exec.Command(bin, append(args, "--help")...).CombinedOutput()
				if err != nil {
					t.Errorf("nvstripe %q: %v\n%s", args, err, out)
				}
			})
		}
	}
}

// hasCommand says whether the binary's --help lists command name.
func hasCommand(t *testing.T, bin, name string) bool {
	t.Helper()
	out, err := exec.Command(bin, "--help").Output()
	if err != nil {
		t.Fatalf("nvstripe --help: %v", err)
	}
	return regexp.MustCompile(`(?m)^\s+` + regexp.QuoteMeta(name) + `\s`).Match(out)
}

// TestManifestsTLSKey: the agent DaemonSet mounts the Secret nvstripe-tls
// (optional, owner-read only), the --tls-key-file its comment tells to add
// names a file in that mount, and the agent takes that flag.
func TestManifestsTLSKey(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the nvstripe binary")
	}
	b, err := os.ReadFile(filepath.Join(manifestDir, "10-agent.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*#\s*- (--tls-key-file=(\S+))$`).FindSubmatch(b)
	if m == nil {
		t.Fatal("10-agent.yaml does not say which --tls-key-file to add")
	}
	arg, file := string(m[1]), string(m[2])
	var agent *podSpec
	for _, ps := range podSpecs(loadManifests(t)) {
		if ps.where == "DaemonSet nvstripe-agent" {
			agent = &ps
		}
	}
	if agent == nil {
		t.Fatal("no DaemonSet nvstripe-agent")
	}
	var vol string
	for _, v := range agent.spec.Volumes {
		if s := v.Secret; s != nil && s.SecretName == "nvstripe-tls" {
			if !ptrTrue(s.Optional) || s.DefaultMode == nil || *s.DefaultMode != 0o400 {
				t.Errorf("Secret nvstripe-tls: optional %v, mode %v; want optional and 0400", s.Optional, s.DefaultMode)
			}
			vol = v.Name
		}
	}
	var mounted bool
	for _, c := range agent.spec.Containers {
		for _, vm := range c.VolumeMounts {
			mounted = mounted || vm.Name == vol && vol != "" && path.Dir(file) == vm.MountPath && vm.ReadOnly
		}
	}
	if !mounted {
		t.Errorf("%s: no read-only mount of the Secret nvstripe-tls at %s", arg, path.Dir(file))
	}
	if out, err := exec.Command(binary(t), "agent", arg, "--help").CombinedOutput(); err != nil {
		t.Errorf("nvstripe agent %s: %v\n%s", arg, err, out)
	}
}
