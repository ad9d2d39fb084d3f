package kubelease

// HistoryName is historyName, for the tests.
var HistoryName = historyName
