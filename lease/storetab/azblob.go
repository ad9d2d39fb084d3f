package storetab

import "time"

// azblob is the Azure Blob Storage store: a blob lease per lease.
var azblob = Row{
	Name:       "Azure",
	Schemes:    []string{"azblob", "azblob+https", "azblob+http"},
	Form:       "azblob://ACCOUNT/CONTAINER",
	Program:    "leaderrun-azblob",
	Package:    "github.com/leaderrun/leaderrun/lease/bloblease",
	Expires:    true,
	MinTTL:     15 * time.Second,
	MaxTTL:     60 * time.Second,
	TTLUnit:    time.Second,
	Poll:       time.Second,
	Step:       2 * time.Second,
	SecretVars: []string{"AZURE_STORAGE_KEY", "AZURE_STORAGE_CONNECTION_STRING", "AZURE_STORAGE_SAS_TOKEN"},
}
