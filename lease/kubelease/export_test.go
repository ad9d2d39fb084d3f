package kubelease

// ObjectName is objName, for the tests.
var ObjectName = objName
var HistoryName = historyName
