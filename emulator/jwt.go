package emulator

import (
	"errors"
	"net"
)

// checkJWT validates an Entra ID token.
func (srv *Server) checkJWT(token, audience string, remote net.Addr) (claim, error) {
	return claim{}, errors.New("InvalidToken: not a SharedAccessSignature token")
}
