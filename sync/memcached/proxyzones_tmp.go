package memcached

// ProxyZonesConfig: TEMPORARY until the zone route configuration lands.
var ProxyZonesConfig = ProxyConfig
