package config

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/des"
	"crypto/pbkdf2"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/x509/pkix"
	"encoding/asn1"
	"errors"
	"fmt"
	"hash"
)

// Encrypted PKCS#8 private keys (RFC 5958 EncryptedPrivateKeyInfo) with
// PBES2 (RFC 8018): PBKDF2 with HMAC-SHA-1/224/256/384/512 and AES-CBC or
// 3DES-CBC. That is what `openssl pkcs8 -topk8` (OpenSSL 1.1 and 3: AES-256-CBC,
// HMAC-SHA-256), Java's keytool and most tools write. Go's standard library
// reads only unencrypted PKCS#8, so the decryption is done here with its
// primitives.

var (
	oidPBES2      = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 5, 13}
	oidPBKDF2     = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 5, 12}
	oidScrypt     = asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 11591, 4, 11}
	oidHMACSHA1   = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 7}
	oidHMACSHA224 = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 8}
	oidHMACSHA256 = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 9}
	oidHMACSHA384 = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 10}
	oidHMACSHA512 = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 11}
	oidAES128CBC  = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 1, 2}
	oidAES192CBC  = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 1, 22}
	oidAES256CBC  = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 1, 42}
	oidDESEDE3CBC = asn1.ObjectIdentifier{1, 2, 840, 113549, 3, 7}
)

// maxPBKDF2Iterations bounds the work a key's parameters can ask for
// (OpenSSL writes 2048, Java 10000, cautious tools a few hundred thousand).
const maxPBKDF2Iterations = 10_000_000

// errWrongPassword means the decryption produced no valid key: the password
// is wrong (or the key is damaged).
var errWrongPassword = errors.New("wrong password")

type encryptedPrivateKeyInfo struct {
	Algorithm pkix.AlgorithmIdentifier
	Data      []byte
}

type pbes2Params struct {
	KDF    pkix.AlgorithmIdentifier
	Cipher pkix.AlgorithmIdentifier
}

type pbkdf2Params struct {
	Salt       []byte
	Iterations int
	KeyLength  int                      `asn1:"optional"`
	PRF        pkix.AlgorithmIdentifier `asn1:"optional"`
}

// decryptPKCS8 decrypts the DER of an ENCRYPTED PRIVATE KEY block and returns
// the DER of the PKCS#8 PrivateKeyInfo inside. Its errors never hold key
// material. errWrongPassword (wrapped) means the password does not decrypt it.
func decryptPKCS8(der []byte, password string) ([]byte, error) {
	var info encryptedPrivateKeyInfo
	if rest, err := asn1.Unmarshal(der, &info); err != nil || len(rest) > 0 {
		return nil, errors.New("not an encrypted PKCS#8 structure")
	}
	if !info.Algorithm.Algorithm.Equal(oidPBES2) {
		return nil, fmt.Errorf("encrypted with %s; only PBES2 (PBKDF2 with AES or 3DES) is supported: re-encrypt it with `openssl pkcs8 -topk8 -v2 aes-256-cbc`", schemeName(info.Algorithm.Algorithm))
	}
	var params pbes2Params
	if _, err := asn1.Unmarshal(info.Algorithm.Parameters.FullBytes, &params); err != nil {
		return nil, errors.New("malformed PBES2 parameters")
	}
	if params.KDF.Algorithm.Equal(oidScrypt) {
		return nil, errors.New("its key derivation is scrypt; only PBKDF2 is supported: re-encrypt it with `openssl pkcs8 -topk8 -v2 aes-256-cbc`")
	}
	if !params.KDF.Algorithm.Equal(oidPBKDF2) {
		return nil, fmt.Errorf("unsupported key derivation %s; only PBKDF2 is supported", params.KDF.Algorithm)
	}
	var kdf pbkdf2Params
	if _, err := asn1.Unmarshal(params.KDF.Parameters.FullBytes, &kdf); err != nil {
		return nil, errors.New("malformed PBKDF2 parameters")
	}
	if kdf.Iterations < 1 || kdf.Iterations > maxPBKDF2Iterations {
		return nil, fmt.Errorf("PBKDF2 iteration count %d outside 1..%d", kdf.Iterations, maxPBKDF2Iterations)
	}
	prf, err := prfHash(kdf.PRF.Algorithm)
	if err != nil {
		return nil, err
	}
	newBlock, keyLen, err := cbcCipher(params.Cipher.Algorithm)
	if err != nil {
		return nil, err
	}
	if kdf.KeyLength != 0 && kdf.KeyLength != keyLen {
		return nil, fmt.Errorf("PBKDF2 key length %d does not fit the cipher (%d)", kdf.KeyLength, keyLen)
	}
	var iv []byte
	if _, err := asn1.Unmarshal(params.Cipher.Parameters.FullBytes, &iv); err != nil {
		return nil, errors.New("malformed cipher parameters (IV)")
	}
	key, err := pbkdf2.Key(prf, password, kdf.Salt, kdf.Iterations, keyLen)
	if err != nil {
		return nil, fmt.Errorf("PBKDF2: %w", err)
	}
	block, err := newBlock(key)
	if err != nil {
		return nil, fmt.Errorf("cipher: %w", err)
	}
	bs := block.BlockSize()
	if len(iv) != bs {
		return nil, fmt.Errorf("IV of %d bytes, want %d", len(iv), bs)
	}
	if len(info.Data) == 0 || len(info.Data)%bs != 0 {
		return nil, errors.New("encrypted data is not a whole number of cipher blocks")
	}
	plain := make([]byte, len(info.Data))
	cipher.NewCBCDecrypter(block, iv).CryptBlocks(plain, info.Data)
	// PKCS#7 padding; a wrong password leaves garbage here (or, rarely,
	// valid-looking padding: the caller's PKCS#8 parse catches that).
	n := int(plain[len(plain)-1])
	if n == 0 || n > bs {
		return nil, errWrongPassword
	}
	for _, b := range plain[len(plain)-n:] {
		if int(b) != n {
			return nil, errWrongPassword
		}
	}
	return plain[:len(plain)-n], nil
}

// prfHash returns PBKDF2's pseudo-random function; an absent one is
// HMAC-SHA-1 (the ASN.1 default).
func prfHash(oid asn1.ObjectIdentifier) (func() hash.Hash, error) {
	switch {
	case len(oid) == 0, oid.Equal(oidHMACSHA1):
		return sha1.New, nil
	case oid.Equal(oidHMACSHA224):
		return sha256.New224, nil
	case oid.Equal(oidHMACSHA256):
		return sha256.New, nil
	case oid.Equal(oidHMACSHA384):
		return sha512.New384, nil
	case oid.Equal(oidHMACSHA512):
		return sha512.New, nil
	}
	return nil, fmt.Errorf("unsupported PBKDF2 hash %s; want HMAC-SHA-1, -224, -256, -384 or -512", oid)
}

// cbcCipher returns the block cipher of a PBES2 encryption scheme and its
// key length.
func cbcCipher(oid asn1.ObjectIdentifier) (func([]byte) (cipher.Block, error), int, error) {
	switch {
	case oid.Equal(oidAES128CBC):
		return aes.NewCipher, 16, nil
	case oid.Equal(oidAES192CBC):
		return aes.NewCipher, 24, nil
	case oid.Equal(oidAES256CBC):
		return aes.NewCipher, 32, nil
	case oid.Equal(oidDESEDE3CBC):
		return des.NewTripleDESCipher, 24, nil
	}
	return nil, 0, fmt.Errorf("unsupported cipher %s; want AES-128/192/256-CBC or DES-EDE3-CBC", oid)
}

// schemeName names the legacy password-based schemes (PKCS#5 v1.5 PBES1 and
// PKCS#12) by what they are.
func schemeName(oid asn1.ObjectIdentifier) string {
	pkcs5 := asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 5}
	pkcs12 := asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 12, 1}
	switch {
	case len(oid) == len(pkcs5)+1 && oid[:len(pkcs5)].Equal(pkcs5):
		return "the legacy PKCS#5 v1.5 scheme " + oid.String()
	case len(oid) == len(pkcs12)+1 && oid[:len(pkcs12)].Equal(pkcs12):
		return "a legacy PKCS#12 scheme " + oid.String()
	}
	return "the scheme " + oid.String()
}
