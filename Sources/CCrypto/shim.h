// OpenSSL libcrypto's EVP digest interface, imported for the verifier.
#ifndef SEGGET_CCRYPTO_SHIM_H
#define SEGGET_CCRYPTO_SHIM_H
#include <openssl/evp.h>

// By default OpenSSL frees its global state from an exit handler. segget never joins its threads
// before it exits, and a thread that frees OpenSSL objects then uses freed state: a writer dropping
// the last reference to a finished batch's loop, whose multi handle freed its TLS connections,
// crashed about one batch in 400 over a lossy link (SIGSEGV in CRYPTO_THREAD_unlock from SSL_free,
// beside OPENSSL_cleanup in exit); a hashing thread freeing a digest context could do the same.
// Called before OpenSSL's first use, as the first initialisation decides: by SeggetCurl before
// curl_global_init, and by SeggetVerify before its first digest.
static inline int segget_crypto_without_atexit(void) {
    return OPENSSL_init_crypto(OPENSSL_INIT_NO_ATEXIT, NULL);
}
// 1 while OpenSSL can be used; 0 once it was cleaned up (it cannot be initialised again then).
static inline int segget_crypto_usable(void) { return OPENSSL_init_crypto(0, NULL); }
#endif
