package k8s

// The kind test is an external test package (it runs experiments, whose
// backend imports this package); it renders and applies overlays with the
// manifest tests' helpers.
var (
	RenderForTest = render
	ApplyForTest  = apply
)
