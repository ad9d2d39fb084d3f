package kubelease

import (
	"context"

	authzv1 "k8s.io/api/authorization/v1"
	coordv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
)

// The API client. client-go's generated clients register every API group
// of Kubernetes at start-up (k8s.io/client-go/kubernetes/scheme), which
// every run would pay for (docs/performance.md, Kubernetes); this store
// needs two, so it speaks to the API
// through a REST client of its own scheme with just those.

// scheme knows Leases and SelfSubjectRulesReviews (and, through them, the
// meta/v1 options and Status).
var scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := coordv1.AddToScheme(s); err != nil {
		panic(err) // registering generated types cannot fail
	}
	if err := authzv1.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}()

var (
	codecs     = serializer.NewCodecFactory(scheme)
	paramCodec = runtime.NewParameterCodec(scheme)
)

// restClient makes a REST client for group version gv from c.
func restClient(c *rest.Config, gv schema.GroupVersion) (*rest.RESTClient, error) {
	cfg := *c
	cfg.GroupVersion = &gv
	cfg.APIPath = "/apis"
	cfg.NegotiatedSerializer = codecs.WithoutConversion()
	return rest.RESTClientFor(&cfg)
}

// leaseAPI is the Leases of one namespace: what the store calls.
type leaseAPI struct {
	rc *rest.RESTClient
	ns string
}

// List lists the namespace's Leases that opts selects.
func (a leaseAPI) List(ctx context.Context, opts metav1.ListOptions) (*coordv1.LeaseList, error) {
	out := &coordv1.LeaseList{}
	err := a.rc.Get().Namespace(a.ns).Resource("leases").VersionedParams(&opts, paramCodec).Do(ctx).Into(out)
	return out, err
}

// Get reads one Lease.
func (a leaseAPI) Get(ctx context.Context, name string, _ metav1.GetOptions) (*coordv1.Lease, error) {
	out := &coordv1.Lease{}
	err := a.rc.Get().Namespace(a.ns).Resource("leases").Name(name).Do(ctx).Into(out)
	return out, err
}

// Create creates l; it fails with 409 AlreadyExists if it exists.
func (a leaseAPI) Create(ctx context.Context, l *coordv1.Lease, _ metav1.CreateOptions) (*coordv1.Lease, error) {
	out := &coordv1.Lease{}
	err := a.rc.Post().Namespace(a.ns).Resource("leases").Body(l).Do(ctx).Into(out)
	return out, err
}

// Update writes l, conditional on its resourceVersion (409 Conflict).
func (a leaseAPI) Update(ctx context.Context, l *coordv1.Lease, _ metav1.UpdateOptions) (*coordv1.Lease, error) {
	out := &coordv1.Lease{}
	err := a.rc.Put().Namespace(a.ns).Resource("leases").Name(l.Name).Body(l).Do(ctx).Into(out)
	return out, err
}

// Delete deletes one Lease, under opts' preconditions.
func (a leaseAPI) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	return a.rc.Delete().Namespace(a.ns).Resource("leases").Name(name).Body(&opts).Do(ctx).Error()
}

// Watch watches the Leases that opts selects, from opts.ResourceVersion.
func (a leaseAPI) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	opts.Watch = true
	return a.rc.Get().Namespace(a.ns).Resource("leases").VersionedParams(&opts, paramCodec).Watch(ctx)
}

// rulesReviewer posts SelfSubjectRulesReviews.
type rulesReviewer struct{ rc *rest.RESTClient }

// Create asks what the user may do (rev.Spec.Namespace).
func (r rulesReviewer) Create(ctx context.Context, rev *authzv1.SelfSubjectRulesReview) (*authzv1.SelfSubjectRulesReview, error) {
	out := &authzv1.SelfSubjectRulesReview{}
	err := r.rc.Post().Resource("selfsubjectrulesreviews").Body(rev).Do(ctx).Into(out)
	return out, err
}
