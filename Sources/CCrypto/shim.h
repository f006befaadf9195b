// OpenSSL libcrypto's EVP digest interface, imported for the verifier.
#ifndef SEGGET_CCRYPTO_SHIM_H
#define SEGGET_CCRYPTO_SHIM_H
#include <openssl/evp.h>

// OpenSSL frees its global state from an exit handler by default; a thread that frees a digest
// context while the process exits would then use freed state. Called before OpenSSL's first use
// (the first initialisation decides), as SeggetCurl does before libcurl's.
static inline int segget_crypto_without_atexit(void) {
    return OPENSSL_init_crypto(OPENSSL_INIT_NO_ATEXIT, NULL);
}
// 1 while OpenSSL can be used; 0 once it was cleaned up.
static inline int segget_crypto_usable(void) { return OPENSSL_init_crypto(0, NULL); }
#endif
