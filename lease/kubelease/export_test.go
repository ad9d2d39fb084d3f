package kubelease

// HistoryName is historyName, for the tests.
var HistoryName = historyName

// SetServiceAccountDir makes dir the pod's service-account mount for the
// rest of the test t (not parallel: saDir is the package's).
func SetServiceAccountDir(t interface{ Cleanup(func()) }, dir string) {
	old := saDir
	saDir = dir
	t.Cleanup(func() { saDir = old })
}
