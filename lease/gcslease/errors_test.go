package gcslease_test

import (
	"errors"
	"net/http"

	"google.golang.org/api/googleapi"
)

func isPrecondition(err error) bool {
	var ge *googleapi.Error
	return errors.As(err, &ge) && ge.Code == http.StatusPreconditionFailed
}
