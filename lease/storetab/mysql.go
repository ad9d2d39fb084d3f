package storetab

import "time"

// mysql is the MySQL and MariaDB store: a row per lease, polled.
var mysql = Row{
	Name:       "MySQL",
	Schemes:    []string{"mysql", "mariadb"},
	Form:       "mysql://user@host/db",
	Program:    "leaderrun-mysql",
	Package:    "github.com/leaderrun/leaderrun/lease/mysqllease",
	Port:       3306,
	Expires:    true,
	MinTTL:     100 * time.Millisecond,
	TTLUnit:    time.Millisecond,
	Poll:       250 * time.Millisecond,
	Step:       400 * time.Millisecond,
	SecretVars: []string{"MYSQL_PWD"},
}
